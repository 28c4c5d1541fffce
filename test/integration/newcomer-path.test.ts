// A newcomer's path through the README, each command a `seedflow` child process in a folder of its own, as a user
// types them (smoke size): `seedflow config smoke-sokoban > run.json` and `seedflow run run.json` on the embedded
// default (the dev server it starts, under its own SEEDFLOW_HOME on free ports), `seedflow report` of that run, a
// second run with one hyperparameter edited in the file (stage2.lr), `seedflow ui` with the compare page of the two
// in headless Chromium, `seedflow import` of the SmolLM2 GGUF and a one-line `seedflow chat`; `seedflow down` at
// the end. The steps run in order and each needs the one before. Each step's time is printed.
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { type Browser, chromium } from 'playwright-core'
import { downLocal } from '../../infra/local-stack.ts'
import { freePort } from '../../infra/ports.ts'
import { seedflow } from '../cli/seedflow-process.ts'
import { TEST_ENV } from './servers.ts'

const FIRST = `newcomer-${process.pid}`
const SECOND = `newcomer-lr-${process.pid}`
/** What the second run changes: Stage 2's learning rate, divided by this. */
const LR_DIVISOR = 4
/** A bound on any one command: a step that hangs fails the test instead of holding it. */
const COMMAND_BOUND_MS = 180_000

/** Evaluations in a `seedflow run`'s closing table (`held-out success of run …:` and a line per evaluation). */
function tableRows(out: string, runId: string): number {
  const table = out.slice(out.indexOf(`held-out success of run ${runId}:`)).split('\n\n')[0] ?? ''
  return table.split('\n').filter((line) => /^ {2}\S.* {2}\d+\.\d% ± \d+\.\d% \(\d+ tasks\)/.test(line)).length
}

describe("a newcomer's path through the README (CLI processes, own dev server and state folder)", () => {
  let dir: string
  let home: string
  let env: NodeJS.ProcessEnv
  let browser: Browser | undefined
  /** Evaluations each run printed, by run id (the compare page draws one point per evaluation). */
  const evaluations = new Map<string, number>()

  /** `seedflow <args>` in the newcomer's folder, bounded in time; prints how long it took. */
  const command = async (args: string[], input?: string) => {
    const started = performance.now()
    const r = await seedflow(args, env, undefined, input, { cwd: dir, killAfterMs: COMMAND_BOUND_MS })
    console.log(`seedflow ${args.join(' ')}: ${((performance.now() - started) / 1000).toFixed(1)} s, exit ${r.code}`)
    assert.ok(
      !r.killed,
      `seedflow ${args.join(' ')} still running after ${COMMAND_BOUND_MS / 1000} s\n${r.out}\n${r.err}`,
    )
    return r
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'seedflow-newcomer-'))
    home = join(dir, '.seedflow')
    env = {
      // the embedded default, as a newcomer has it: no cluster, no bucket, no injected faults
      TEMPORAL_ADDRESS: undefined,
      TEMPORAL_PROFILE: undefined,
      TEMPORAL_CONFIG_FILE: undefined,
      SEEDFLOW_S3_BUCKET: undefined,
      SEEDFLOW_ARTIFACTS_DIR: undefined,
      SEEDFLOW_TEMPORAL_UI_URL: undefined,
      SEEDFLOW_FAULT: undefined,
      // a state folder and dev server of its own: never another run's (or a user's on the default ports)
      SEEDFLOW_HOME: home,
      SEEDFLOW_TEMPORAL_PORT: String(await freePort()),
      SEEDFLOW_TEMPORAL_HTTP_PORT: String(await freePort()),
      SEEDFLOW_TEMPORAL_UI_PORT: String(await freePort()),
      SEEDFLOW_TEMPORAL_METRICS_PORT: String(await freePort()),
    }
  })

  after(async () => {
    await browser?.close()
    if (home) {
      const down = await seedflow(['down'], env, undefined, undefined, { cwd: dir, killAfterMs: 30_000 })
      if (down.code !== 0) {
        console.log(`seedflow down: exit ${down.code}\n${down.err}`)
        await downLocal({ ...process.env, SEEDFLOW_HOME: home })
      }
    }
    if (dir) await rm(dir, { recursive: true, force: true })
  })

  it('runs the smoke preset from `seedflow config` and ends with the held-out table', async () => {
    const config = await command(['config', 'smoke-sokoban'])
    assert.equal(config.code, 0, config.err)
    await writeFile(join(dir, 'run.json'), config.out) // `npx seedflow config smoke-sokoban > run.json`
    const r = await command(['run', 'run.json', '--run-id', FIRST])
    assert.equal(r.code, 0, `${r.out}\n${r.err}`)
    assert.match(r.out, /seedflow: Temporal dev server started at 127\.0\.0\.1:\d+ /)
    assert.match(r.out, new RegExp(`seedflow: run ${FIRST}: seed on sokoban, 3 iterations .*\\(run\\.json\\)`))
    assert.ok(r.out.includes(`seedflow: artifacts: ${home}/local/artifacts/runs/${FIRST}/\n`), r.out)
    const rows = tableRows(r.out, FIRST)
    assert.ok(rows >= 3, `warm-start, Stage 1 and final in the table\n${r.out}`)
    assert.match(r.out, /\n {2}iteration 2 \(final\) /)
    assert.match(r.out, new RegExp(`npx seedflow report ${FIRST} --open`))
    evaluations.set(FIRST, rows)
  })

  it('writes the report of that run into ./report-<run>/index.html, naming it', async () => {
    assert.ok(evaluations.has(FIRST), 'the first run did not finish')
    const r = await command(['report', FIRST])
    assert.equal(r.code, 0, `${r.out}\n${r.err}`)
    const index = join(dir, `report-${FIRST}`, 'index.html')
    assert.ok(r.out.includes(`seedflow: report of ${FIRST} in ${index} (3 skill pages)`), r.out)
    const page = await readFile(index, 'utf8')
    assert.ok(page.includes(`<strong>${FIRST}</strong>`), 'the run in the header')
    // the state from the dev server the run started (found through SEEDFLOW_HOME), not the store alone
    assert.match(page, /completed · finished \(3 of 3 iterations\)/)
  })

  it('runs again with stage2.lr edited in the file, and the run records the changed rate', async () => {
    assert.ok(evaluations.has(FIRST), 'the first run did not finish')
    const config = JSON.parse(await readFile(join(dir, 'run.json'), 'utf8'))
    const lr = config.stage2.lr as number
    config.stage2.lr = lr / LR_DIVISOR
    await writeFile(join(dir, 'run-lr.json'), `${JSON.stringify(config, null, 2)}\n`)
    const r = await command(['run', 'run-lr.json', '--run-id', SECOND])
    assert.equal(r.code, 0, `${r.out}\n${r.err}`)
    assert.match(
      r.out,
      new RegExp(`seedflow: Temporal dev server reused at 127\\.0\\.0\\.1:${env.SEEDFLOW_TEMPORAL_PORT} `),
    )
    const rows = tableRows(r.out, SECOND)
    assert.ok(rows >= 3, r.out)
    const recorded = async (id: string) =>
      JSON.parse(await readFile(join(home, 'local', 'artifacts', 'runs', id, 'run.json'), 'utf8')).config.stage2.lr
    assert.deepEqual([await recorded(FIRST), await recorded(SECOND)], [lr, lr / LR_DIVISOR])
    evaluations.set(SECOND, rows)
  })

  it('shows both runs side by side on the `seedflow ui` compare page in a browser, with no page errors', async () => {
    assert.equal(evaluations.size, 2, 'both runs must have finished')
    let stop: ((name: NodeJS.Signals) => void) | undefined
    let url: ((value: string) => void) | undefined
    const listening = new Promise<string>((resolve) => {
      url = resolve
    })
    const started = performance.now()
    const ui = seedflow(
      ['ui', '--port', '0'],
      env,
      (line, signal) => {
        stop = signal
        const at = /^seedflow ui: (http:\/\/\S+) /.exec(line)?.[1]
        if (at) url?.(at)
      },
      undefined,
      { cwd: dir, killAfterMs: COMMAND_BOUND_MS },
    )
    const exited = ui.then((r): never => {
      throw new Error(`seedflow ui exited (${r.code}) before it listened\n${r.out}\n${r.err}`)
    })
    exited.catch(() => {}) // once it listened, its exit is awaited below
    const base = await Promise.race([listening, exited])
    const errors: string[] = []
    try {
      browser = await chromium.launch({
        executablePath: process.env[TEST_ENV.chromium] || 'chromium',
        args: ['--no-sandbox', '--disable-gpu'],
      })
      const page = await browser.newPage({ viewport: { width: 1300, height: 1000 } })
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text())
      })
      page.on('pageerror', (e) => errors.push(e.message))
      const compare = new URL(`/compare?run=${FIRST}&run=${SECOND}`, base).href
      const response = await page.goto(compare)
      assert.ok(response?.ok(), `${compare}: HTTP ${response?.status()}`)
      const header = await page.$$eval('table tr td:first-child strong', (cells) => cells.map((c) => c.textContent))
      assert.deepEqual(header, [FIRST, SECOND])
      const body = (await page.textContent('body')) ?? ''
      assert.equal(body.match(/completed · finished \(3 of 3 iterations\)/g)?.length, 2, body.slice(0, 2000))
      // the held-out chart: drawn (an SVG), one point per evaluation of either run
      const points = await page.$$eval(
        'figure[data-figure="held-out"] svg g.mark-symbol.role-mark path',
        (paths) => paths.length,
      )
      assert.equal(points, (evaluations.get(FIRST) ?? 0) + (evaluations.get(SECOND) ?? 0))
    } finally {
      stop?.('SIGINT')
      const r = await ui
      console.log(`seedflow ui, compare page: ${((performance.now() - started) / 1000).toFixed(1)} s, exit ${r.code}`)
      assert.equal(r.code, 0, `seedflow ui on Ctrl-C: exit ${r.code}\n${r.err}`)
    }
    assert.deepEqual(errors, [])
  })

  it('imports the SmolLM2 GGUF into a folder that `seedflow chat` answers from', async () => {
    const gguf = process.env[TEST_ENV.model]
    assert.ok(gguf, `${TEST_ENV.model} is not set: run the integration tier through test/run.ts`)
    const imported = await command(['import', gguf, '--out', 'smollm2'])
    assert.equal(imported.code, 0, `${imported.out}\n${imported.err}`)
    assert.match(imported.out, /imported .*SmolLM2-135M-Instruct\.Q4_1\.gguf \(llama; tensors /)
    for (const file of ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'])
      assert.ok(existsSync(join(dir, 'smollm2', file)), file)
    // printf 'What is the capital of France?\n' | npx seedflow chat smollm2 --temperature 0
    const chat = await command(['chat', 'smollm2', '--temperature', '0'], 'What is the capital of France?\n')
    assert.equal(chat.code, 0, `${chat.out}\n${chat.err}`)
    assert.match(chat.err, /seedflow: chatting with .*smollm2/)
    assert.match(chat.err, /seedflow: \d+ tokens \(prompt \d+\), [\d.]+ tokens\/s, finish: stop\n/)
    console.log(`the model's answer: ${chat.out.trim()}`)
    assert.match(chat.out, /Paris/)
  })
})
