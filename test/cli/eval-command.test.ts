// `seedflow eval` on a micro warm-start checkpoint: the CLI as a user runs it (table and JSON agree, per-task
// records sum to the aggregates), a run's checkpoint through a folder store, and every bad input rejected
// with a clear message (exit code 1 from the binary).
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { type EvalOptions, type EvalReport, evalCommand, type SkillGapReport } from '../../cli/eval-command.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { encodeCheckpoint } from '../../policy/checkpoint.ts'
import { saveCheckpoint } from '../../records/checkpoint-store.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { putJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import { microCheckpoint, microConfig } from '../compute/micro.ts'
import { seedflow } from './seedflow-process.ts'

const RUN = 'eval-run'

const quiet = { out: () => {}, err: () => {} }
const defaults: EvalOptions = { split: 'test-seen', temperature: 0.4, threads: 1 }

describe('seedflow eval', () => {
  let dir: string
  let folder: string
  let env: NodeJS.ProcessEnv
  const saved = { ...process.env }

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'seedflow-eval-'))
    folder = join(dir, 'micro-checkpoint')
    const engine = createLocalEngine({ threads: 1 })
    const checkpoint = await microCheckpoint(engine)
    await engine.close()
    const { mkdirSync } = await import('node:fs')
    mkdirSync(folder)
    for (const [file, bytes] of Object.entries(encodeCheckpoint(checkpoint))) writeFileSync(join(folder, file), bytes)
    const store = new FsArtifactStore(join(dir, 'artifacts'))
    await putJson(store, keys.runRecord(RUN), { runId: RUN, config: microConfig('seed'), configSha256: 'x' })
    await saveCheckpoint(
      store,
      keys.baseCheckpoint(RUN, 'model.safetensors').replace('model.safetensors', ''),
      checkpoint,
    )
    env = { SEEDFLOW_ARTIFACTS_DIR: join(dir, 'artifacts'), SEEDFLOW_S3_BUCKET: '' }
    Object.assign(process.env, env)
  })

  after(() => {
    process.env = saved
    rmSync(dir, { recursive: true, force: true })
  })

  it('evaluates a checkpoint folder: the JSON matches the printed table, and the records sum to the aggregates', async () => {
    const out = join(dir, 'eval.json')
    const r = await seedflow(
      [...['eval', folder, '--env', 'sokoban', '--seeds', '3:9', '--out', out, '--threads', '1']],
      env,
    )
    assert.equal(r.code, 0, `exit ${r.code}\n${r.out}\n${r.err}`)
    const report = JSON.parse(readFileSync(out, 'utf8')) as EvalReport
    assert.deepEqual(report.seeds, { from: 3, to: 9 })
    assert.equal(report.settings.source, 'preset cpu-sokoban')
    assert.deepEqual(
      report.tasks.map((t) => t.seed),
      [3, 4, 5, 6, 7, 8],
    )
    const a = report.aggregates
    const won = report.tasks.filter((t) => t.success).length
    assert.equal(a.success.value, won / 6)
    assert.equal(a.length.value, report.tasks.reduce((s, t) => s + t.steps, 0) / 6)
    assert.equal(a.score.value, report.tasks.reduce((s, t) => s + t.score, 0) / 6)
    const steps = report.tasks.reduce((s, t) => s + t.steps, 0)
    assert.equal(a.invalidRate.value, report.tasks.reduce((s, t) => s + t.invalidSteps, 0) / steps)
    for (const [family, f] of Object.entries(a.perFamily)) {
      const mine = report.tasks.filter((t) => t.family === family)
      assert.equal(f.tasks, mine.length)
      assert.equal(f.success.value, mine.filter((t) => t.success).length / mine.length)
    }
    const pct = (x: number | null) => `${(100 * (x as number)).toFixed(1)}%`
    const line = (label: string) => r.out.split('\n').find((l) => l.trimStart().startsWith(label)) ?? ''
    assert.match(
      line('success overall'),
      new RegExp(
        `success overall +6 +${pct(a.success.value)} +\\[${pct(a.success.low)}, ${pct(a.success.high)}\\]`.replace(
          /\./g,
          '\\.',
        ),
      ),
    )
    assert.ok(line('success macro').includes(pct(a.macroSuccess.value)), r.out)
    assert.ok(line('mean length').includes(a.length.value.toFixed(2)), r.out)
    assert.ok(line('mean score').includes(a.score.value.toFixed(3)), r.out)
    assert.ok(line('invalid rate').includes(pct(a.invalidRate.value)), r.out)
    for (const [family, f] of Object.entries(a.perFamily))
      assert.ok(line(`success ${family}`).includes(pct(f.success.value)), r.out)
  })

  it("--skill-gap runs the premise check instead: the printed figures are the JSON's", async () => {
    const out = join(dir, 'gap.json')
    const r = await seedflow(
      ['eval', folder, '--env', 'sokoban', '--split', 'validation', '--seeds', '0:5', '--skill-gap', '--out', out],
      env,
    )
    assert.equal(r.code, 0, `exit ${r.code}\n${r.out}\n${r.err}`)
    const report = JSON.parse(readFileSync(out, 'utf8')) as SkillGapReport
    assert.deepEqual(report.seeds, { from: 0, to: 5 })
    const { result } = report
    assert.equal(result.tasks, 5)
    const g = result.gaps.ownVsOther
    assert.match(r.out, new RegExp(`own skill − another task's: [+-]${Math.abs(g.perStep).toFixed(3)} nats`))
    assert.match(r.out, new RegExp(`above 0 in ${g.positive} of ${g.tasks} tasks`))
    assert.match(r.out, new RegExp(`no skill ${result.logprob.none.toFixed(3)}`))
  })

  it("evaluates a run's base checkpoint with the run's prompt settings", async () => {
    const report = await evalCommand(undefined, { ...defaults, run: RUN, iteration: 'base', episodes: 2 }, quiet)
    assert.equal(report.settings.source, `run ${RUN}`)
    assert.equal(report.checkpoint.location, `runs/${RUN}/base/checkpoint/`)
    assert.equal(report.tasks.length, 2)
  })

  const rejects = (checkpoint: string | undefined, options: Partial<EvalOptions>, message: RegExp) =>
    assert.rejects(evalCommand(checkpoint, { ...defaults, ...options }, quiet), message)

  it('rejects a missing checkpoint', () => rejects(join(dir, 'nope'), { env: 'sokoban' }, /no checkpoint .*nope/))
  it('rejects a store key with no checkpoint', () =>
    rejects('runs/x/sft/checkpoint/', { env: 'sokoban' }, /no checkpoint at runs\/x\/sft\/checkpoint\//))
  it('rejects an unknown run', () =>
    rejects(undefined, { run: 'ghost' }, /unknown run ghost: no runs\/ghost\/run\.json/))
  it('rejects an unknown iteration', () =>
    rejects(undefined, { run: RUN, iteration: '3' }, /run eval-run has no checkpoint of iteration 3/))
  it('rejects a malformed iteration', () =>
    rejects(
      undefined,
      { run: RUN, iteration: 'last' },
      /unknown iteration "last": use a number k, base, stage1 or final/,
    ))
  it('rejects a missing Stage 1 checkpoint', () =>
    rejects(undefined, { run: RUN, iteration: 'stage1' }, /has no stage1 checkpoint/))
  it('rejects a bad seed range', () => rejects(folder, { env: 'sokoban', seeds: '9:3' }, /bad seed range "9:3"/))
  it('rejects an unknown env', () => rejects(folder, { env: 'chess' }, /unknown env "chess"/))
  it('rejects an unknown split', () => rejects(folder, { env: 'sokoban', split: 'train' }, /unknown split "train"/))
  it('rejects an env that differs from the run', () =>
    rejects(
      undefined,
      { run: RUN, iteration: 'base', env: 'household' },
      /--env household does not match run eval-run, which trained on sokoban/,
    ))
  it('needs --env for a checkpoint outside any run', () => rejects(folder, {}, /give --env/))
  it('needs a run for a row with library skills', () =>
    rejects(folder, { env: 'sokoban', algorithmRow: 'skill-prompt' }, /needs a run's annotations/))

  it('exits with code 1 and the message on bad input', async () => {
    const r = await seedflow(['eval', '--run', 'ghost'], env)
    assert.equal(r.code, 1)
    assert.match(r.err, /seedflow: unknown run ghost/)
  })
})
