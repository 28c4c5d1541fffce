// The run report and `seedflow ui` in a real browser (headless Chromium through playwright-core), over micro runs
// of the real pipeline on the real dev server and S3 store: a run held by a failing update in its second
// iteration (running, awaiting an operator) whose ui page reloads itself and shows the iteration once the
// operator's retry lets it finish; a second run held the same way and then terminated (a failed run); both side by
// side; and the written report: no console errors, every figure with one point per evaluation or iteration, the
// skill page's trajectories with coloured tokens, a model answer holding `<script>` shown as text. Screenshots go
// under the test state folder, their paths printed.
import assert from 'node:assert/strict'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { pathToFileURL } from 'node:url'
import { ApplicationFailure } from '@temporalio/common'
import type { ActivityInterceptorsFactory } from '@temporalio/worker'
import { type Browser, chromium, type Page } from 'playwright-core'
import type { UpdateInput } from '../../records/contracts.ts'
import { parseSkillLines } from '../../records/skill-library.ts'
import { escapeHtml } from '../../report/html.ts'
import { startUiServer } from '../../report/ui-server.ts'
import { writeReport } from '../../report/write-report.ts'
import { keys } from '../../store/keys.ts'
import { TASK_QUEUES } from '../../workers/task-queues.ts'
import { seedRun } from '../../workflows/index.ts'
import { retryIterationUpdate } from '../../workflows/operator.ts'
import { statusQuery } from '../../workflows/seed-run.ts'
import { microConfig } from '../compute/micro.ts'
import { type PipelineHarness, startPipeline } from './pipeline-harness.ts'
import { TEST_ENV, testServers } from './servers.ts'
import { until } from './until.ts'

const PID = process.pid
const LIVE = `report-live-${PID}` // seed-oracle: a teacher signal on every sample
const FAILED = `report-failed-${PID}` // seed: analyzer records
const ITERATIONS = 2
const INJECTED = '<script>window.__injected = 1</script>'

/** Runs whose update of iteration 1 fails (non-retryable: the run waits for an operator) while held. */
const held = new Set([LIVE, FAILED])
const injected: ActivityInterceptorsFactory = (ctx) => ({
  inbound: {
    async execute(input, next) {
      const workflowId = ctx.info.workflowExecution?.workflowId ?? ''
      const run = [...held].find((id) => workflowId.startsWith(id))
      if (run && ctx.info.activityType === 'update' && (input.args[0] as UpdateInput).iteration === 1)
        throw ApplicationFailure.nonRetryable('held by the report test', 'TestHold')
      return next(input)
    },
  },
})

const config = (row: 'seed' | 'seed-oracle') => {
  const c = microConfig(row)
  return { ...c, stage2: { ...c.stage2, iterations: ITERATIONS }, evaluation: { ...c.evaluation, tasks: 2, every: 1 } }
}

/** What the page functions read of the browser's globals (the project's types have no DOM library). */
interface Browserish {
  document: { body: { textContent: string | null } }
  __injected?: number
}

/** Data points (not legend symbols) of each figure on the page, by figure id. */
async function points(page: Page): Promise<Record<string, number>> {
  return page.$$eval('figure[data-figure]', (figures) =>
    Object.fromEntries(
      figures.map((f) => [f.getAttribute('data-figure'), f.querySelectorAll('g.mark-symbol.role-mark path').length]),
    ),
  )
}

describe('the run report in a browser (real servers, headless Chromium)', () => {
  let harness: PipelineHarness
  let browser: Browser
  let shots: string
  const errors: string[] = []

  const open = async (url: string): Promise<Page> => {
    const page = await browser.newPage({ viewport: { width: 1300, height: 1000 } })
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(`${url}: ${m.text()}`)
    })
    page.on('pageerror', (e) => errors.push(`${url}: ${e.message}`))
    const response = await page.goto(url)
    assert.ok(!response || response.ok(), `${url}: HTTP ${response?.status()}`)
    return page
  }
  const shoot = async (page: Page, name: string) => {
    const path = join(shots, `${name}.png`)
    await page.screenshot({ path, fullPage: true })
    console.log(`screenshot: ${path}`)
  }

  before(async () => {
    const executablePath = process.env[TEST_ENV.chromium] || 'chromium'
    browser = await chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-gpu'] })
    shots = join(testServers().stateDir, 'report-screenshots')
    await mkdir(shots, { recursive: true })
    harness = await startPipeline(`report-browser-${PID}`, { activityInterceptors: [injected] })
  })
  after(async () => {
    await browser?.close()
    await harness?.close()
  })

  it('serves a running run whose page updates, a failed one, and both side by side, without errors', async () => {
    const { client, store } = harness
    const start = (id: string, row: 'seed' | 'seed-oracle') =>
      client.workflow.start(seedRun, {
        workflowId: id,
        taskQueue: TASK_QUEUES.control,
        args: [{ runId: id, config: config(row) }],
      })
    const live = await start(LIVE, 'seed-oracle')
    const failed = await start(FAILED, 'seed')
    const waiting = async (handle: typeof live) => (await handle.query(statusQuery)).awaitingOperator !== null
    await until('both runs held in iteration 1', async () => (await waiting(live)) && (await waiting(failed)), 240_000)
    await failed.terminate('the report test ends it')

    const ui = await startUiServer({
      store,
      host: '127.0.0.1',
      port: 0,
      trajectories: 8,
      refreshSeconds: 1,
      temporal: async (ids) => {
        const status = new Map<string, string>()
        for (const id of ids) status.set(id, (await client.workflow.getHandle(id).describe()).status.name)
        return { status }
      },
    })
    try {
      const page = await open(new URL(`/runs/${LIVE}/`, ui.url).href)
      assert.match((await page.textContent('body')) ?? '', /running · 1 of 2 iterations complete/)
      assert.equal((await points(page))['rollout-success'], 1)
      await shoot(page, 'ui-running')

      held.delete(LIVE)
      await live.executeUpdate(retryIterationUpdate, { args: [{}] })
      await live.result()
      // the page reloads itself while the run is not finished: no navigation by the test. It waits for the
      // completed state itself: a reload between the last iteration's record and the workflow's end shows
      // "running · finished (2 of 2 iterations)" for up to a refresh period.
      await page.waitForFunction(
        () =>
          (globalThis as unknown as Browserish).document.body.textContent?.includes(
            'completed · finished (2 of 2 iterations',
          ),
        undefined,
        { timeout: 30_000 },
      )
      assert.equal((await points(page))['rollout-success'], ITERATIONS)
      assert.match((await page.textContent('body')) ?? '', /completed · finished/)

      const dead = await open(new URL(`/runs/${FAILED}/`, ui.url).href)
      assert.match((await dead.textContent('body')) ?? '', /terminated · 1 of 2 iterations complete/)
      const both = await open(new URL(`/compare?run=${LIVE}&run=${FAILED}`, ui.url).href)
      assert.equal((await both.$$('table tr')).length > 2, true)
      await shoot(both, 'ui-side-by-side')
      await open(ui.url)
    } finally {
      await ui.close()
    }
    assert.deepEqual(errors, [])
  })

  it('writes a report whose every figure, skill page and escaped answer renders in the browser', async () => {
    const { store } = harness
    // the failed run's analyzer "wrote" a reply with a script in it (the model's text is untrusted)
    const key = keys.skills(FAILED, 0, 0)
    const records = parseSkillLines((await store.get(key)).toString('utf8'), key)
    assert.ok(records.length > 0)
    const tampered = records.map((r, i) => (i === 0 ? { ...r, raw: INJECTED, skill: INJECTED, summary: INJECTED } : r))
    await store.put(key, Buffer.from(tampered.map((r) => `${JSON.stringify(r)}\n`).join('')))

    const out = await mkdtemp(join(tmpdir(), 'seedflow-report-'))
    try {
      const { index, pages } = await writeReport(store, [LIVE], join(out, 'live'), { trajectories: 8 })
      assert.equal(pages.length, ITERATIONS)
      const report = await open(pathToFileURL(index).href)
      const drawn = await points(report)
      const live = await harness.client.workflow.getHandle(LIVE).result()
      assert.equal(drawn['held-out'], live.evaluations.length)
      for (const id of [
        'rollout-success',
        'episode-length',
        'pg-loss',
        'kl',
        'entropy',
        'opd-loss',
        'tokens-per-second',
      ])
        assert.equal(drawn[id], ITERATIONS, id)
      assert.equal(drawn['opd-gate'], 2 * ITERATIONS)
      await shoot(report, 'report')

      const skills = await open(pathToFileURL(pages[0] as string).href)
      const shown = await skills.$$eval('section.traj', (s) => s.length)
      assert.ok(shown > 0 && shown <= 8, `${shown} trajectories`)
      const coloured = await skills.$$eval(
        'span.tok',
        (t) => t.filter((x) => x.getAttribute('style')?.includes('background')).length,
      )
      assert.ok(coloured > 0, 'tokens coloured by the shift')
      await skills.selectOption('#outcome', 'failure')
      const failures = await skills.$$eval('section.traj:not([hidden])', (s) =>
        s.every((x) => x.getAttribute('data-won') === '0'),
      )
      assert.ok(failures)
      await shoot(skills, 'skills')

      const { pages: failedPages } = await writeReport(store, [FAILED], join(out, 'failed'), {
        trajectories: 200,
        iterations: [0],
      })
      const unsafe = await open(pathToFileURL(failedPages[0] as string).href)
      assert.equal(await unsafe.evaluate(() => (globalThis as unknown as Browserish).__injected), undefined)
      assert.ok((await unsafe.content()).includes(escapeHtml(INJECTED)))
      assert.ok((await unsafe.textContent('body'))?.includes(INJECTED), 'the script shows as text')
      await shoot(unsafe, 'skills-untrusted')
    } finally {
      await rm(out, { recursive: true, force: true })
    }
    assert.deepEqual(errors, [])
  })
})
