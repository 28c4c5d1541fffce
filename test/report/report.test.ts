// The run report, the skill page, the TensorBoard scalars and `seedflow ui`'s routes over a micro run that the real
// pipeline activities wrote to a folder store: figures with one point per evaluation or iteration, escaped model
// text, an unfinished run (its last iteration manifest removed, then restored) and unknown runs or iterations.
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { decodeEvent } from '../../exports/tensorboard/event.ts'
import { readRecords } from '../../exports/tensorboard/tfrecord.ts'
import { exportTensorBoard, runScalars } from '../../exports/tensorboard-run.ts'
import { UnknownRunError } from '../../records/audit.ts'
import type { RunRecord } from '../../records/record-run.ts'
import { parseSkillLines } from '../../records/skill-library.ts'
import { escapeHtml, html, markupText } from '../../report/html.ts'
import { readRunData } from '../../report/run-data.ts'
import { runPage } from '../../report/run-page.ts'
import { NotInspectableError, readIterationSkills } from '../../report/skill-data.ts'
import { skillPage } from '../../report/skill-page.ts'
import { startUiServer } from '../../report/ui-server.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { sha256Hex } from '../../store/hash.ts'
import { canonicalJson, getJson, putJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import { runMicro } from '../activities/micro-run.ts'
import { microConfig } from '../compute/micro.ts'

const RUN = 'report-run'
/** A row whose teacher reads the oracle skill: a teacher signal even where the micro analyzer parses nothing. */
const ORACLE = 'report-oracle'
const ITERATIONS = 2
const INJECTED = '<script>window.__injected = 1</script><img src=x onerror="alert(1)">'
const engine = createLocalEngine({ threads: 1 })
const links = { skills: (run: string, k: number) => `${run}/iteration-${k}.html` }

/** Symbols (data points; not the legend's) per figure of a report page, by the figure's id. */
export function symbolsPerFigure(page: string): Map<string, number> {
  const out = new Map<string, number>()
  const figures = page.split('<figure data-figure="').slice(1)
  for (const f of figures) {
    const id = f.slice(0, f.indexOf('"'))
    let n = 0
    for (const group of f.split('class="mark-symbol role-mark').slice(1)) {
      const body = group.slice(0, group.indexOf('</g>'))
      n += body.split('<path').length - 1
    }
    out.set(id, n)
  }
  return out
}

describe('html escaping', () => {
  it('escapes every interpolation and keeps markup made by the template', () => {
    assert.equal(escapeHtml(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;')
    const inner = html`<b>${INJECTED}</b>`
    assert.equal(
      markupText(html`<p>${inner}${[1, '<i>']}${null}${false}</p>`),
      `<p><b>${escapeHtml(INJECTED)}</b>1&lt;i&gt;</p>`,
    )
  })
})

describe('the run report of a micro run (folder store, real pipeline activities)', () => {
  let root: string
  let store: FsArtifactStore

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-report-'))
    store = new FsArtifactStore(join(root, 'store'))
    for (const [runId, row] of [
      [RUN, 'seed'],
      [ORACLE, 'seed-oracle'],
    ] as const) {
      const c = microConfig(row)
      await runMicro(createPipelineActivities({ store, engine }), runId, {
        ...c,
        stage2: { ...c.stage2, iterations: ITERATIONS },
        evaluation: { ...c.evaluation, every: 1 },
      })
    }
  })
  after(async () => {
    await engine.close()
    await rm(root, { recursive: true, force: true })
  })

  it('reads every iteration and evaluation, and draws one point per evaluation and per iteration', async () => {
    const run = await readRunData(store, RUN)
    assert.deepEqual(
      run.iterations.map((it) => it.iteration),
      [0, 1],
    )
    assert.deepEqual(run.progress, { complete: 2, planned: 2, finished: true })
    assert.ok(run.iterations.every((it) => it.inspectable))
    const kinds = run.evaluations.map((e) => `${e.kind}:${e.iteration}`)
    assert.deepEqual(kinds, ['base:-1', 'stage1:-1', 'iteration:0', 'iteration:1'])
    const page = await runPage([run], { links })
    const points = symbolsPerFigure(page)
    assert.equal(points.get('held-out'), run.evaluations.length)
    for (const id of [
      'rollout-success',
      'episode-length',
      'invalid-rate',
      'pg-loss',
      'kl',
      'entropy',
      'parse-rate',
      'tokens-per-second',
    ])
      assert.equal(points.get(id), ITERATIONS, id)

    // the oracle row distils every sample; side by side with the first run, each run draws its own points
    const oracle = await readRunData(store, ORACLE)
    const both = symbolsPerFigure(await runPage([run, oracle], { links }))
    assert.equal(both.get('held-out'), run.evaluations.length + oracle.evaluations.length)
    assert.equal(both.get('rollout-success'), 2 * ITERATIONS)
    const present = (r: typeof run, names: string[]) =>
      r.iterations.flatMap((it) => names.filter((n) => it.metrics[n as keyof typeof it.metrics] !== null)).length
    assert.equal(both.get('opd-loss'), present(run, ['update/opd_loss']) + ITERATIONS)
    assert.equal(
      both.get('opd-gate'),
      present(run, ['update/opd_gate_mean', 'update/opd_positive_gap_share']) + 2 * ITERATIONS,
    )
    const gaps = ['rescore/teacher_gap_expert', 'rescore/teacher_gap_other']
    assert.equal(both.get('teacher-gap'), present(run, gaps) + present(oracle, gaps))
    assert.match(page, /finished \(2 of 2 iterations/)
    assert.match(page, /href="report-run\/iteration-1\.html"/)
  })

  it('tables per-family success with micro and macro rows where the environment has families', async () => {
    const run = await readRunData(store, RUN)
    const families = {
      pick: { tasks: 3, successRate: 2 / 3 },
      clean: { tasks: 1, successRate: 0 },
    }
    const evaluations = run.evaluations.map((e) => ({ ...e, perFamily: families, success: 0.5, macroSuccess: 1 / 3 }))
    const page = await runPage([{ ...run, evaluations }], { links })
    const table = page.slice(page.indexOf('<th>family</th>'), page.indexOf('</table>', page.indexOf('<th>family</th>')))
    assert.match(table, /<tr><td>clean<\/td>(<td class="num">0\.0% \(1\)<\/td>){4}<\/tr>/)
    assert.match(table, /<tr><td>pick<\/td>(<td class="num">66\.7% \(3\)<\/td>){4}<\/tr>/)
    assert.match(table, /<tr><th>macro<\/th>(<th class="num">33\.3%<\/th>){4}<\/tr>/)
    assert.match(table, /<tr><th>micro<\/th>(<th class="num">50\.0% \(4\)<\/th>){4}<\/tr>/)
    assert.match(await runPage([run], { links }), /One task family: micro and macro averages agree/)
  })

  it('lists hyperparameter changes with the iteration that first ran under them', async () => {
    const run = await readRunData(store, RUN)
    const change = (seq: number, configSha256: string) => ({
      seq,
      source: 'setHyperparameters' as const,
      iteration: 0,
      phase: 'update',
      overrides: { stage2: { lr: 1e-4 * (seq + 1) } },
      cumulative: {},
      at: '2026-12-02T00:00:00.000Z',
      configSha256,
      runId: RUN,
      previousConfigSha256: run.record.configSha256,
    })
    const iterations = run.iterations.map((it) => ({
      ...it,
      configSha256: it.iteration === 1 ? 'b'.repeat(64) : it.configSha256,
    }))
    const page = await runPage(
      [{ ...run, iterations, hyperparameters: [change(0, 'b'.repeat(64)), change(1, 'c'.repeat(64))] }],
      { links },
    )
    assert.match(page, /\{&quot;stage2&quot;:\{&quot;lr&quot;:0\.0001\}\}<\/td><td>iteration 1<\/td>/)
    assert.match(page, /\{&quot;stage2&quot;:\{&quot;lr&quot;:0\.0002\}\}<\/td><td>no iteration under it yet<\/td>/)
  })

  it("shows the skill page's trajectories with coloured tokens, and model text only as text", async () => {
    const key = keys.skills(RUN, 0, 0)
    const records = parseSkillLines((await store.get(key)).toString('utf8'), key)
    const first = records[0]
    assert.ok(first)
    const tampered = [{ ...first, raw: INJECTED, summary: INJECTED, skill: INJECTED }, ...records.slice(1)]
    await store.put(key, Buffer.from(tampered.map((r) => `${JSON.stringify(r)}\n`).join('')))
    const data = await readIterationSkills(store, RUN, 0, { limit: 3 })
    assert.equal(data.trajectories.length, Math.min(3, data.total))
    const page = skillPage(data, { report: '../index.html' })
    assert.equal(page.split('<section class="traj"').length - 1, data.trajectories.length)
    const oracle = skillPage(await readIterationSkills(store, ORACLE, 0, { limit: 3 }), { report: '../index.html' })
    assert.match(oracle, /class="tok" style="background:rgba\(/, 'tokens with a teacher signal are coloured')
    assert.ok(page.includes(escapeHtml(INJECTED)), 'the injected answer shows as text')
    assert.ok(!page.includes('<script>window.__injected'), 'and is never markup')
    assert.ok(!page.includes('<img src=x'))
    assert.equal(page.split('<script>').length - 1, 1, "only the page's own script")
    const all = await readIterationSkills(store, ORACLE, 0, { limit: 1000 })
    const tokens = all.trajectories.flatMap((t) => t.steps.flatMap((s) => s.tokens))
    assert.ok(tokens.some((t) => t.shift !== null && t.gate !== null && t.gate > 0 && t.gate < 1))
    await assert.rejects(readIterationSkills(store, RUN, 7, { limit: 3 }), NotInspectableError)
  })

  it('colours the skill page with the β of the configuration the iteration ran under (after a change)', async () => {
    const record = (await getJson(store, keys.runRecord(ORACLE))) as RunRecord
    const base = record.config as { stage2: { opdBeta: number } }
    assert.equal((await readIterationSkills(store, ORACLE, 1, { limit: 2 })).beta, base.stage2.opdBeta)
    const changed = { ...base, stage2: { ...base.stage2, opdBeta: base.stage2.opdBeta * 2 } }
    const configSha256 = sha256Hex(Buffer.from(canonicalJson(changed)))
    await putJson(store, keys.effectiveConfig(ORACLE, configSha256), {
      runId: ORACLE,
      configSha256,
      baseConfigSha256: record.configSha256,
      overrides: { stage2: { opdBeta: changed.stage2.opdBeta } },
      config: changed,
    })
    const metricsKey = keys.metrics(ORACLE, 1)
    const saved = await store.get(metricsKey)
    await putJson(store, metricsKey, { ...(JSON.parse(saved.toString('utf8')) as object), configSha256 })
    try {
      const data = await readIterationSkills(store, ORACLE, 1, { limit: 2 })
      assert.equal(data.beta, changed.stage2.opdBeta)
      const token = data.trajectories.flatMap((t) => t.steps.flatMap((st) => st.tokens)).find((t) => t.shift !== null)
      assert.ok(token && token.shift !== null)
      assert.ok(Math.abs((token.gate ?? 0) - 1 / (1 + Math.exp(-data.beta * token.shift))) < 1e-12)
    } finally {
      await store.put(metricsKey, saved)
    }
  })

  it('writes the scalars TensorBoard reads: every metric per iteration at step k + 1, evaluations at their updates', async () => {
    assert.deepEqual(
      (await runScalars(store, RUN)).points.filter((p) => p.tag === 'analyze/parse_rate').map((p) => p.step),
      [1, 2],
    )
    const { points } = await runScalars(store, ORACLE)
    const steps = (tag: string) => points.filter((p) => p.tag === tag).map((p) => p.step)
    assert.deepEqual(steps('rollout/success_rate'), [1, 2])
    assert.deepEqual(steps('update/opd_loss'), [1, 2])
    assert.deepEqual(steps('eval/test-seen/success'), [0, 1, 2])
    const out = join(root, 'tb')
    const { files } = await exportTensorBoard(store, ORACLE, out)
    const events = readRecords(await readFile(files[0] as string)).map(decodeEvent)
    assert.equal(events[0]?.fileVersion, 'brain.Event:2')
    assert.equal(events.length, points.length + 1)
    assert.deepEqual(events[1]?.values[0]?.tag, points[0]?.tag)
  })

  it('reports an unfinished run, refuses an unknown one, and `seedflow ui` serves and refreshes its pages', async () => {
    const manifest = keys.iterationManifest(RUN, 1)
    const saved = await store.get(manifest)
    await store.delete(manifest)
    const ui = await startUiServer({ store, host: '127.0.0.1', port: 0, trajectories: 4, refreshSeconds: 7 })
    try {
      const get = async (path: string) => {
        const res = await fetch(new URL(path, ui.url))
        return { status: res.status, text: await res.text() }
      }
      const partial = await readRunData(store, RUN)
      assert.deepEqual(partial.progress, { complete: 1, planned: 2, finished: false })
      const running = await get(`/runs/${RUN}/`)
      assert.equal(running.status, 200)
      assert.match(running.text, /1 of 2 iterations complete/)
      assert.match(running.text, /<meta http-equiv="refresh" content="7">/)
      assert.equal(symbolsPerFigure(running.text).get('rollout-success'), 1)

      await store.put(manifest, saved) // the run goes on and finishes
      const finished = await get(`/runs/${RUN}/`)
      assert.match(finished.text, /finished \(2 of 2 iterations/)
      assert.doesNotMatch(finished.text, /http-equiv="refresh"/)
      assert.equal(symbolsPerFigure(finished.text).get('rollout-success'), 2)

      const index = await get('/')
      assert.match(index.text, new RegExp(`href="/runs/${RUN}/"`))
      const skills = await get(`/runs/${RUN}/iterations/1`)
      assert.equal(skills.status, 200)
      assert.match(skills.text, /skills of iteration 1/)
      const both = await get(`/compare?run=${RUN}&run=${RUN}`)
      assert.equal(both.status, 200)
      for (const [path, pattern] of [
        ['/runs/nope/', /unknown run nope/],
        [`/runs/${RUN}/iterations/9`, /no complete iteration 9/],
        ['/runs/..%2F..%2Fetc/', /not a run id/],
        ['/elsewhere', /no page at \/elsewhere/],
      ] as const) {
        const r = await get(path)
        assert.equal(r.status, 404, path)
        assert.match(r.text, pattern)
      }
    } finally {
      await ui.close()
    }
    await assert.rejects(readRunData(store, 'nope'), UnknownRunError)
  })
})
