// The learning benchmark (issue 6, run through the product since issue 17): does SEED beat GRPO on our
// environments with the built-in tiny model? Every number comes from seedRun workflows on the embedded Temporal
// dev server with the in-process worker, read from the evaluations they stored. For every (env, seed): one base
// run (the warm-start and its evaluations), one Stage 1 run forked from its base, then one run per row forked
// from the base or from Stage 1 (the row's start), so the rows of one seed share one warm-start and one Stage 1
// and see the same tasks per iteration (the iteration seed does not depend on the row). Resumable: an
// (env, row, seed) already in the results file is skipped, and a run id that already finished is read, not
// rerun (its phases are reused from the store when the dev server's state is gone). Results go to
// bench/results/learning.json after each (env, row, seed) leg, with the leg's per-iteration diagnostics in
// bench/results/learning-runs/, then the table and plot are rebuilt (bench/learning-report.ts), with what
// orchestration cost per iteration (Temporal time beside compute time); `--commit` commits them as each leg ends.
// Starts (issue 42): the seeds' shared starts (base and Stage 1 runs) are made first, at ONE ORT thread whatever
// `--threads` says for the rows (one thread is bit-reproducible on one machine), and checked against their record,
// bench/results/learning-starts.json (the sha256 of every checkpoint file; bench/learning-starts.ts): a start
// whose bytes differ is refused, naming both hashes. Their stored objects are not in the tree: each start is
// bundled (bench/run-bundle.ts) into a cache folder of this machine (`--starts`, default
// $SEEDFLOW_CACHE_DIR/learning-starts, else ~/.cache/seedflow/learning-starts) and restored from there into a fresh
// store; a start that is neither there nor in the store is made again by the pipeline. To regenerate starts from
// nothing and check them (a fresh store and dev server: SEEDFLOW_HOME=<empty folder>):
//   npm run bench:learning -- --regenerate-starts --envs household --seeds 3 [--start-runs base|stage1]
// `--record-starts` records a start whose checkpoints differ as the new reference (another machine, changed code),
// the old one kept in its history.
// Usage: npm run bench:learning [-- --envs sokoban --rows seed,grpo --seeds 1,2,3 --eval-tasks 1000 --commit]
// A hyperparameter sweep evaluates on validation only, under its own run ids and results file:
//   npm run bench:learning -- --rows seed --set stage2.opdCoef=1 --splits validation --prefix sweep \
//     --out bench/results/learning-sweep.json --runs bench/results/learning-sweep-runs --commit
// Other starts (issue 46): `--start-set warmstart.<field>=<v>` makes other bases (own --prefix and --out),
// `--stage1-set stage1.<field>=<v>` another Stage 1 of the same base (its run id and its rows' name the settings),
// `--control-gap` records the control gap in every leg with a teacher (docs/benchmarks.md §3.8).
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Client, Connection, type ConnectionOptions, WorkflowNotFoundError } from '@temporalio/client'
import { watchRun } from '../cli/progress.ts'
import { quietRuntime, resolveTemporal } from '../cli/run-command.ts'
import type { Split } from '../envs/types.ts'
import { localPaths } from '../infra/local-stack.ts'
import type { PhaseManifest } from '../records/phase-manifest.ts'
import { ALGORITHMS, type AlgorithmName, needsLibrary, needsStage1 } from '../seed/algorithms.ts'
import { parseRunConfig, type RunConfig, type RunEnvName, Stage2Schema } from '../seed/config.ts'
import { cpuPreset } from '../seed/presets/cpu.ts'
import { type ArtifactStore, listAll } from '../store/artifact-store.ts'
import { latestAttempt } from '../store/attempts.ts'
import { storeFromEnv } from '../store/from-env.ts'
import { sha256Hex } from '../store/hash.ts'
import { canonicalJson, getJson } from '../store/json.ts'
import { keys } from '../store/keys.ts'
import { createLocalWorker, type LocalWorker } from '../workers/local.ts'
import { TASK_QUEUES } from '../workers/task-queues.ts'
import { type Evaluation, type SeedRunResult, seedRun } from '../workflows/seed-run.ts'
import { type LearningEntry, type LearningResults, writeLearningReport } from './learning-report.ts'
import {
  checkpointDifferences,
  checkpointsOf,
  checkStart,
  readStartsRecord,
  STARTS_RECORD,
  StartMismatchError,
  startsCache,
  storedCheckpoints,
  withStart,
  writeStartsRecord,
} from './learning-starts.ts'
import { orchestrationShare } from './orchestration.ts'
import { bundleRun, readBundle, restoreRun } from './run-bundle.ts'

/** Rows the benchmark runs: those that evaluate without skills in the prompt. */
const BENCH_ROWS = ['seed', 'grpo', 'seed-oracle', 'seed-static', 'seed-library', 'seed-no-sft'] as const

/**
 * What the benchmark evaluates per environment: the splits of the start and final evaluations (sokoban's
 * test-unseen is its test-seen, the same generator) and tasks per split (the issue's minimums); the learning
 * curve's intermediate points are on the first split.
 */
interface BenchEnv {
  splits: [Split, ...Split[]]
  finalTasks: number
}
const BENCH_ENVS: Partial<Record<RunEnvName, BenchEnv>> = {
  sokoban: { splits: ['test-seen', 'validation'], finalTasks: 1000 },
  household: { splits: ['test-unseen', 'validation', 'test-seen'], finalTasks: 300 },
  ezpoints: { splits: ['test-seen', 'validation'], finalTasks: 1000 },
}
const benchEnv = (env: RunEnvName): BenchEnv => BENCH_ENVS[env] as BenchEnv

const args = parseArgs({
  options: {
    envs: { type: 'string', default: 'sokoban' },
    rows: { type: 'string', default: 'seed,grpo' },
    seeds: { type: 'string', default: '1,2,3' },
    /** Default per environment (BENCH_ENVS). */
    'eval-tasks': { type: 'string' },
    'curve-every': { type: 'string', default: '4' },
    iterations: { type: 'string' },
    out: { type: 'string', default: 'bench/results/learning.json' },
    /** Where each leg's per-iteration diagnostics go (one JSON file per env, row and seed). */
    runs: { type: 'string', default: 'bench/results/learning-runs' },
    /**
     * Where each seed's shared start (its base and Stage 1 runs' stored objects, bench/run-bundle.ts) is kept on this
     * machine, so the rows of a seed can run in later sessions from the same warm-start and Stage 1: a cache folder
     * outside the tree (bench/learning-starts.ts).
     */
    starts: { type: 'string', default: startsCache() },
    /** The committed record of the starts' checkpoints, which every start made or restored is checked against. */
    'starts-record': { type: 'string', default: STARTS_RECORD },
    /**
     * Make the starts (`--start-runs`) of `--envs` × `--seeds` from nothing at one ORT thread, check them against
     * their record and bundle them in `--starts`; no rows. The store must not hold those runs (a fresh SEEDFLOW_HOME).
     */
    'regenerate-starts': { type: 'boolean', default: false },
    /** Which starts `--regenerate-starts` makes: base, stage1 or both (Stage 1's base is then restored, or made). */
    'start-runs': { type: 'string', default: 'base,stage1' },
    /** Record starts whose checkpoints differ from their record as the new reference (the old kept in history). */
    'record-starts': { type: 'boolean', default: false },
    /** Prefix of the benchmark's run ids (another prefix starts over). */
    prefix: { type: 'string', default: 'lb' },
    /** ORT threads of the in-process worker's engine (SEEDFLOW_ORT_THREADS). */
    threads: { type: 'string', default: '2' },
    /**
     * Stage 2 overrides, `stage2.opdCoef=1` or a nested field `stage2.stage1Mix.steps=8` (values are JSON scalars);
     * the row is recorded as `seed[stage2.opdCoef=1]`.
     */
    set: { type: 'string', multiple: true, default: [] },
    /**
     * Warm-start overrides of every run of the benchmark, its starts included, e.g. `warmstart.skillDetours=0.3`
     * (the contrastive skill-reading start, docs/benchmarks.md §3.8); they make other starts, so they need their
     * own `--prefix`.
     */
    'start-set': { type: 'string', multiple: true, default: [] },
    /**
     * Stage 1 overrides, e.g. `stage1.lr=0.0003`, of the Stage 1 start and of the rows that start from it (not of the
     * base, so a seed's base is shared): they make another Stage 1 start, whose run id (and its rows') names them.
     */
    'stage1-set': { type: 'string', multiple: true, default: [] },
    /**
     * Score the control prompt in every leg that has a teacher (`stage2.controlGap`, a diagnostic that changes no
     * update, so not in the row key): the control gap per iteration, for the premise's sign (docs/benchmarks.md §3.8).
     */
    'control-gap': { type: 'boolean', default: false },
    /**
     * Evaluate on these splits only (a comma list, the environment's first named split carrying the learning curve),
     * e.g. `validation` for a hyperparameter sweep that must not see test tasks; default every benchmark split.
     */
    splits: { type: 'string' },
    /** Commit the results file and the leg's diagnostics after each (env, row, seed) leg. */
    commit: { type: 'boolean', default: false },
  },
}).values

const list = (s: string) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)
const envs = list(args.envs) as RunEnvName[]
const rows = list(args.rows) as AlgorithmName[]
const seeds = list(args.seeds).map(Number)
const evalTasks = (env: RunEnvName) => Number(args['eval-tasks'] ?? benchEnv(env).finalTasks)
const curveEvery = Number(args['curve-every'])
for (const row of rows) {
  if (!(BENCH_ROWS as readonly string[]).includes(row)) throw new Error(`--rows: ${row} is not one of ${BENCH_ROWS}`)
}
for (const env of envs) if (!BENCH_ENVS[env]) throw new Error(`--envs: no benchmark settings for ${env}`)
/** The splits the runs of `env` evaluate: the benchmark's, or those of `--splits` among them (in that order). */
function splitsOf(env: RunEnvName): [Split, ...Split[]] {
  const all = benchEnv(env).splits
  if (args.splits === undefined) return all
  const asked = list(args.splits)
  for (const s of asked) {
    if (!(all as readonly string[]).includes(s))
      throw new Error(`--splits: ${env} evaluates ${all.join(', ')}, not ${s}`)
  }
  const kept = all.filter((s) => asked.includes(s))
  if (kept.length === 0) throw new Error('--splits: name at least one split')
  return kept as [Split, ...Split[]]
}
for (const env of envs) splitsOf(env)
const startRuns = list(args['start-runs'])
for (const kind of startRuns) {
  if (kind !== 'base' && kind !== 'stage1') throw new Error(`--start-runs: ${kind} is not base or stage1`)
}

/** Commits `paths` and nothing else that is staged; retried while another git process holds the index. */
function commitPaths(message: string, paths: readonly string[]): void {
  for (let attempt = 1; ; attempt++) {
    const add = spawnSync('git', ['add', '--', ...paths], { encoding: 'utf8' })
    const commit =
      add.status === 0 ? spawnSync('git', ['commit', '-q', '-m', message, '--', ...paths], { encoding: 'utf8' }) : add
    if (commit.status === 0) {
      log(`  committed: ${message}`)
      return
    }
    if (attempt === 5) {
      log(`  not committed (${(commit.stderr || commit.stdout).trim()}): commit ${paths.join(' ')} by hand`)
      return
    }
    spawnSync('sleep', ['2'])
  }
}

const started = performance.now()
const log = (...parts: unknown[]) => console.log(`[${((performance.now() - started) / 1000).toFixed(0)}s]`, ...parts)
const pct = (x: number) => `${(100 * x).toFixed(1)}%`

function readResults(): LearningResults {
  return existsSync(args.out) ? (JSON.parse(readFileSync(args.out, 'utf8')) as LearningResults) : {}
}

function writeAtomic(path: string, text: string): void {
  mkdirSync(join(path, '..'), { recursive: true })
  writeFileSync(`${path}.tmp`, text)
  renameSync(`${path}.tmp`, path)
}

/**
 * `--set stage2.<path>=<JSON scalar>` overrides (Stage 2 only: the shared warm-start and Stage 1 stay valid); a
 * bare word is a string (`stage2.opdGate=control`); a nested path into a field that is null
 * (`stage2.stage1Mix.steps`) makes the object, which the schema then checks.
 */
const overrides = (args.set ?? []).map((s) => {
  const match = /^stage2\.([A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*)=(.+)$/.exec(s)
  if (!match) throw new Error(`--set ${s}: expected stage2.<field>[.<field>]=<value>`)
  const raw = match[2] as string
  let value: unknown
  try {
    value = /^[A-Za-z][A-Za-z0-9-]*$/.test(raw) && !['true', 'false', 'null'].includes(raw) ? raw : JSON.parse(raw)
  } catch {
    throw new Error(`--set ${s}: the value is not JSON (a number, true/false, a word or a quoted string)`)
  }
  if (typeof value === 'object' && value !== null) throw new Error(`--set ${s}: set an object's fields one by one`)
  return { path: (match[1] as string).split('.'), value }
})
/**
 * `--<flag> <section>.<field>=<JSON scalar>` overrides of one config section's flat fields (`--start-set warmstart.…`,
 * `--stage1-set stage1.…`), as `{ field: value }`.
 */
function sectionOverrides(flag: string, section: string, given: readonly string[]): Record<string, unknown> {
  const pattern = new RegExp(`^${section}\\.([A-Za-z0-9]+)=(.+)$`)
  return Object.fromEntries(
    given.map((s) => {
      const match = pattern.exec(s)
      if (!match) throw new Error(`--${flag} ${s}: expected ${section}.<field>=<value>`)
      return [match[1] as string, JSON.parse(match[2] as string) as unknown]
    }),
  )
}
/** `--start-set warmstart.<field>=<JSON scalar>`: the warm-start settings of every run, starts included. */
const startOverrides = sectionOverrides('start-set', 'warmstart', args['start-set'] ?? [])
if (Object.keys(startOverrides).length > 0 && (args.prefix === 'lb' || args.out === 'bench/results/learning.json'))
  throw new Error('--start-set makes other starts: give them their own --prefix and --out')
/** `--stage1-set stage1.<field>=<JSON scalar>`: the Stage 1 settings of the Stage 1 start and the rows from it. */
const stage1Set = [...(args['stage1-set'] ?? [])].sort()
const stage1Overrides = sectionOverrides('stage1-set', 'stage1', stage1Set)
if (stage1Set.length > 0 && args.out === 'bench/results/learning.json')
  throw new Error('--stage1-set makes other Stage 1 starts: give their rows their own --out')
/** What names a run that reads Stage 1 when its settings are overridden (its run id's tail). */
const stage1Tag: string[] = stage1Set.length ? [stage1Set.join(',')] : []
/** The row's key in the results: its name, with the overrides it ran under (sorted, so the order given does not matter). */
const rowKey = (row: string) => (args.set?.length ? `${row}[${[...args.set].sort().join(',')}]` : row)

/**
 * Sets `path` in `target` (a copy of Stage 2), making objects where a nested field's parent is null; the first
 * field must be a Stage 2 setting of the schema (optional ones too, absent from the preset), the rest the schema
 * checks.
 */
function setPath(target: Record<string, unknown>, path: readonly string[], value: unknown, what: string, top = true) {
  const [head, ...rest] = path as [string, ...string[]]
  if (top && !(head in Stage2Schema.shape)) throw new Error(`--set ${what}: ${head} is not a Stage 2 setting`)
  if (rest.length === 0) {
    target[head] = value
    return
  }
  const child = target[head]
  const next = typeof child === 'object' && child !== null ? { ...(child as Record<string, unknown>) } : {}
  target[head] = next
  setPath(next, rest, value, what, false)
}

/**
 * The run configuration of a leg (the CPU preset, the benchmark's evaluations, the Stage 2 overrides, maybe a fork),
 * or of a base or Stage 1 run (`iterations: 0`: no Stage 2, so no overrides, and the same config whatever leg asks).
 */
function config(
  env: RunEnvName,
  row: AlgorithmName,
  seed: number,
  stage: { iterations?: number; fork?: RunConfig['fork']; stage1?: boolean } = {},
): RunConfig {
  const c = cpuPreset(env, row)
  const iterations = stage.iterations ?? (args.iterations ? Number(args.iterations) : c.stage2.iterations)
  const stage2: Record<string, unknown> = { ...c.stage2, iterations }
  if (iterations > 0) for (const o of overrides) setPath(stage2, o.path, o.value, `stage2.${o.path.join('.')}`)
  if (iterations > 0 && args['control-gap']) stage2.controlGap = true
  const [curve, ...more] = splitsOf(env)
  const tasks = evalTasks(env)
  const evaluation = {
    ...c.evaluation,
    split: curve,
    seedStart: 0,
    tasks,
    every: curveEvery,
    splits: more.map((split) => ({ split, tasks })),
  }
  const warmstart = c.warmstart ? { ...c.warmstart, ...startOverrides } : c.warmstart
  const stage1 = stage.stage1 ? { ...c.stage1, ...stage1Overrides } : c.stage1
  const parsed = parseRunConfig({
    ...c,
    seed,
    warmstart,
    stage1,
    stage2,
    evaluation,
    ...(stage.fork ? { fork: stage.fork } : {}),
  })
  if (!parsed.ok) throw new Error(`run config of ${env} ${row} seed ${seed}: ${parsed.problems.join('; ')}`)
  return parsed.config
}

/** Longest run id the pipeline takes (activities' InvalidRunIdError). */
const MAX_RUN_ID = 128

/** A leg's run id: its parts, with a hash of the whole in place of the tail where they are too long. */
function runId(...parts: (string | number)[]): string {
  const id = [args.prefix, ...parts]
    .join('-')
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/-+$/, '')
  if (id.length <= MAX_RUN_ID) return id
  const hash = createHash('sha256').update(id).digest('hex').slice(0, 12)
  return `${id.slice(0, MAX_RUN_ID - hash.length - 1)}-${hash}`
}

/** The run the benchmark is waiting for (named when it is interrupted). */
let current: string | undefined

/** Runs seedRun `id` to its end, or reads the result of the run of that id that already finished. */
async function runToEnd(client: Client, id: string, c: RunConfig): Promise<SeedRunResult> {
  current = id
  const handle = client.workflow.getHandle<typeof seedRun>(id)
  try {
    const { status } = await handle.describe()
    if (status.name === 'COMPLETED') {
      log(`  ${id}: finished before; read`)
      return await handle.result()
    }
    if (status.name === 'RUNNING') {
      log(`  ${id}: running; waiting for it`)
      return await watched(client, id, handle.result())
    }
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error
  }
  log(
    `  ${id}: starting seedRun (${c.algorithm}, ${c.stage2.iterations} iterations${c.fork ? `, forked from ${c.fork.run} at ${JSON.stringify(c.fork.at)}` : ''})`,
  )
  const started = await client.workflow.start(seedRun, {
    taskQueue: TASK_QUEUES.control,
    workflowId: id,
    args: [{ runId: id, config: c }],
    workflowIdReusePolicy: 'ALLOW_DUPLICATE',
  })
  return watched(client, id, started.result())
}

/** Which start a run is, for its record. */
interface StartOf {
  env: RunEnvName
  seed: number
  kind: 'base' | 'stage1'
  forkedFrom?: string
}

/** The config hash a run was recorded with (its run.json). */
async function recordedConfig(id: string): Promise<string> {
  return ((await getJson(store, keys.runRecord(id))) as { configSha256: string }).configSha256
}

async function hasObjects(id: string): Promise<boolean> {
  for await (const _ of listAll(store, keys.runPrefix(id))) return true
  return false
}

/** The command that regenerates a start (the benchmark's settings that shape its config, and the start's run). */
function regenerateCommand(start: StartOf): string {
  const extra = [
    args.prefix !== 'lb' ? `--prefix ${args.prefix}` : '',
    ...(args['start-set'] ?? []).map((s) => `--start-set ${s}`),
    ...(start.kind === 'stage1' ? stage1Set.map((s) => `--stage1-set ${s}`) : []),
    args['eval-tasks'] !== undefined ? `--eval-tasks ${args['eval-tasks']}` : '',
    args['curve-every'] !== '4' ? `--curve-every ${args['curve-every']}` : '',
    args.splits !== undefined ? `--splits ${args.splits}` : '',
  ].filter(Boolean)
  return [
    'npm run bench:learning -- --regenerate-starts',
    `--envs ${start.env} --seeds ${start.seed} --start-runs ${start.kind}`,
    ...extra,
  ].join(' ')
}

/** How this machine made a start (for its record). */
function madeBy(): string {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim() || 'unknown'
  const dirty = spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).stdout.trim()
  const cpu = cpus()
  return (
    `bench:learning at 1 ORT thread, ${new Date().toISOString().slice(0, 10)}, commit ${head}${dirty ? ' with uncommitted changes' : ''}, ` +
    `on ${cpu[0]?.model ?? 'an unknown CPU'} (${cpu.length} cores)`
  )
}

/**
 * Runs a seed's shared start (its base or Stage 1 run) to its end at one ORT thread and checks its checkpoints
 * against their record (`--starts-record`), refusing a start whose bytes differ (bench/learning-starts.ts). The
 * start comes from this machine's bundle in `--starts` when one is there (checked, then restored into the store,
 * so the pipeline reuses its stored phases instead of training them again), else from the store, else the
 * pipeline makes it; once made it is bundled there. A start without a record is recorded (committed with
 * `--commit`); `--record-starts` replaces a differing record, keeping the old one in its history. With
 * `--regenerate-starts` the start is made from nothing (the store must not hold the run) and the bundle replaced.
 */
async function sharedStart(client: Client, id: string, c: RunConfig, start: StartOf): Promise<SeedRunResult> {
  const file = join(args.starts, `${id}.jsonl.gz`)
  const recordFile = args['starts-record']
  const recorded = readStartsRecord(recordFile).starts[id]
  const regenerate = args['regenerate-starts'] && startRuns.includes(start.kind)
  if (regenerate) {
    if (await hasObjects(id))
      throw new Error(
        `--regenerate-starts: run ${id} already has objects in ${store.location}; a regeneration starts from none: point SEEDFLOW_HOME at an empty folder (a fresh store and dev server)`,
      )
    log(`  ${id}: regenerating at one ORT thread${recorded ? `, to be checked against ${recordFile}` : ''}`)
  } else if (existsSync(file)) {
    const bundle = readBundle(file)
    const runJson = bundle.objects.find((o) => o.key === keys.runRecord(id))
    const configSha256 = runJson
      ? (JSON.parse(runJson.data.toString('utf8')) as { configSha256: string }).configSha256
      : '(none)'
    if (recorded) checkStart(recorded, { checkpoints: checkpointsOf(id, bundle.objects), configSha256 }, `in ${file}`)
    // the pipeline would refuse the run id (RunConfigConflict) after the restore; say why before writing anything
    const wanted = sha256Hex(Buffer.from(canonicalJson(c)))
    if (configSha256 !== wanted)
      throw new StartMismatchError(
        `${file} holds run ${id} with config ${configSha256}, but this benchmark's config of it is ${wanted} (the preset or the schema changed since): regenerate the start (${regenerateCommand(start)} --record-starts) in an empty SEEDFLOW_HOME, or move the bundle away`,
      )
    const restored = await restoreRun(store, file)
    if (restored.written > 0)
      log(`  ${id}: restored ${restored.written} of ${restored.objects} stored objects from ${file}`)
  }
  const found = !regenerate && (await hasObjects(id)) // restored, or left in the store by an earlier session
  const result = await runToEnd(client, id, c)
  const made = { checkpoints: await storedCheckpoints(store, id), configSha256: await recordedConfig(id) }
  const what = regenerate ? 'regenerated' : found ? `in ${store.location}` : 'made here'
  const same =
    recorded !== undefined && checkpointDifferences(recorded.checkpoints, made.checkpoints, what).length === 0
  if (recorded && !same && !args['record-starts']) checkStart(recorded, made, what) // throws, naming both hashes
  if (!same) {
    const entry = {
      env: start.env,
      seed: start.seed,
      kind: start.kind,
      runId: id,
      ...(start.forkedFrom ? { forkedFrom: start.forkedFrom } : {}),
      ortThreads: 1 as const,
      regenerate: regenerateCommand(start),
      results: args.out,
      madeBy: found
        ? `found in ${store.location} (made by an earlier session, at threads this one cannot see), recorded ${new Date().toISOString().slice(0, 10)}`
        : madeBy(),
      configSha256: made.configSha256,
      checkpoints: made.checkpoints,
      history: [],
    }
    writeStartsRecord(recordFile, withStart(readStartsRecord(recordFile), entry, args['record-starts']))
    log(
      `  ${id}: checkpoints ${recorded ? 'recorded anew (the old ones kept in its history)' : 'recorded'} in ${recordFile}`,
    )
    if (args.commit) commitPaths(`bench:learning: the checkpoints of ${id}, a seed's shared start`, [recordFile])
  } else log(`  ${id}: checkpoints as recorded in ${recordFile} (${what})`)
  if (regenerate || !existsSync(file)) {
    const bundled = await bundleRun(store, id, file)
    log(`  ${id}: ${bundled.objects} stored objects (${(bundled.bytes / 2 ** 20).toFixed(1)} MiB) bundled in ${file}`)
  }
  return result
}

/**
 * A run's result, with its progress (phase, step, iteration, evaluations) logged at most twice a minute meanwhile,
 * each line with the time of day and the machine's 1-minute load average: a phase that runs slow on a busy or
 * slow machine shows it in the log.
 */
async function watched(client: Client, id: string, result: Promise<SeedRunResult>): Promise<SeedRunResult> {
  const stamp = () => `${new Date().toISOString().slice(11, 16)}Z load ${loadavg()[0]?.toFixed(1)}`
  const watcher = watchRun(client, id, (line) => log(`  ${id} ${line} (${stamp()})`), 30_000)
  let evaluations: readonly Evaluation[] | undefined
  try {
    const r = await result
    evaluations = r.evaluations
    return r
  } finally {
    await watcher.stop(evaluations) // the evaluations the polls missed, once the run has ended
  }
}

/** The benchmark's entries from a run's stored evaluations (their manifests name the stored JSON). */
async function entries(
  store: ArtifactStore,
  result: SeedRunResult,
  checkpoint: LearningEntry['checkpoint'],
  env: RunEnvName,
) {
  const out: LearningEntry[] = []
  for (const e of result.evaluations as Evaluation[]) {
    const manifest = (await getJson(store, e.manifestKey)) as PhaseManifest
    const stored = manifest.outputs.evaluation
    if (!stored) throw new Error(`${e.manifestKey} records no evaluation`)
    const evaluation = (await getJson(store, stored.key, stored.sha256)) as {
      split: string
      successRate: number
      macroSuccessRate: number
      perFamily: Record<string, unknown>
      meanScore: number
      tasks: number
    }
    const checkpointSha256 = manifest.inputs.checkpoint
    if (!checkpointSha256) throw new Error(`${e.manifestKey} names no evaluated checkpoint`)
    const iteration = e.target?.kind === 'iteration' ? e.target.iteration + 1 : 0
    out.push({
      iteration,
      split: evaluation.split,
      checkpoint,
      success: evaluation.successRate,
      macro: evaluation.macroSuccessRate,
      families: Object.keys(evaluation.perFamily).length,
      score: evaluation.meanScore,
      episodes: evaluation.tasks,
      checkpointSha256,
    })
    log(
      `    ${checkpoint} ${iteration} on ${evaluation.split}: ${pct(evaluation.successRate)} micro, ` +
        `${pct(evaluation.macroSuccessRate)} macro (${evaluation.tasks} tasks; checkpoint ${checkpointSha256.slice(0, 12)}) [${env}]`,
    )
  }
  return out
}

/** Each iteration's metrics.json (parse rate, OPD gate, teacher gaps …), as the run stored them. */
async function iterationMetrics(store: ArtifactStore, id: string, iterations: number) {
  const out: unknown[] = []
  for (let k = 0; k < iterations; k++) {
    const attempt = await latestAttempt(store, (a) => keys.metrics(id, k, a))
    out.push(attempt === undefined ? null : await getJson(store, keys.metrics(id, k, attempt)))
  }
  return out
}

const { target } = await resolveTemporal()
const store = storeFromEnv(localPaths().artifacts)
log(`artifacts in ${store.location}; starts in ${args.starts}`)
quietRuntime()
/** ORT threads of the rows (the starts are made at one thread). */
const rowThreads = process.env.SEEDFLOW_ORT_THREADS ?? args.threads
const connection = await Connection.connect(target.connectionOptions as ConnectionOptions)
const client = new Client({ connection, namespace: target.namespace })

/** Runs `work` with an in-process worker whose engine has `threads` ORT threads, then closes the worker. */
async function withWorker<T>(threads: string, work: () => Promise<T>): Promise<T> {
  process.env.SEEDFLOW_ORT_THREADS = threads // the worker's engine reads it when it first loads a model
  const local: LocalWorker = await createLocalWorker({
    connectionOptions: target.connectionOptions,
    namespace: target.namespace,
    store,
    // one activity at a time on each model-bound queue: a leg's worker that also takes up another leg's work
    // on the same dev server (after a killed process) then queues it instead of holding both phases' memory at
    // once (a warm-start beside a seed-oracle update reached 17.8 GB, docs/benchmarks.md §3.7); the engine has
    // one thread, so running them together was not faster
    modelActivitySlots: 1,
  })
  try {
    return await local.runUntil(work())
  } finally {
    await local.close()
  }
}

/** A seed's start entries (the warm-start's evaluations, and Stage 1's when a row needs it), by `${env}/${seed}`. */
const starts = new Map<string, { base: LearningEntry[]; stage1: LearningEntry[] }>()

/** The starts of every (env, seed) with a row to run (or, with --regenerate-starts, of every one asked for). */
async function makeStarts(): Promise<void> {
  for (const env of envs) {
    for (const seed of seeds) {
      const todo = rows.filter((row) => !readResults()[env]?.[rowKey(row)]?.[String(seed)])
      if (!args['regenerate-starts'] && todo.length === 0) continue
      const baseId = runId(env, `s${seed}`, 'base')
      log(`${env} seed ${seed}: the base run (warm-start and its evaluations)`)
      const base = await sharedStart(client, baseId, config(env, 'grpo', seed, { iterations: 0 }), {
        env,
        seed,
        kind: 'base',
      })
      const baseEntries = await entries(store, base, 'warm-start', env)
      const needsPi0 = args['regenerate-starts']
        ? startRuns.includes('stage1')
        : todo.some((row) => needsStage1(ALGORITHMS[row]) || needsLibrary(ALGORITHMS[row]))
      const stage1Id = runId(env, `s${seed}`, 'stage1', ...stage1Tag)
      let stage1Entries: LearningEntry[] = []
      if (needsPi0) {
        log(`${env} seed ${seed}: the Stage 1 run, forked from the base`)
        const fork = { run: baseId, at: 'base' as const }
        const pi0 = await sharedStart(
          client,
          stage1Id,
          config(env, 'seed', seed, { iterations: 0, fork, stage1: true }),
          {
            env,
            seed,
            kind: 'stage1',
            forkedFrom: baseId,
          },
        )
        stage1Entries = (await entries(store, pi0, 'stage1', env)).filter((e) => e.checkpoint === 'stage1')
      }
      starts.set(`${env}/${seed}`, { base: baseEntries, stage1: stage1Entries })
    }
  }
}

/** Every (env, row, seed) leg not yet in the results, from its seed's start. */
async function runRows(): Promise<void> {
  for (const env of envs) {
    for (const seed of seeds) {
      const todo = rows.filter((row) => !readResults()[env]?.[rowKey(row)]?.[String(seed)])
      if (todo.length === 0) {
        log(`${env} seed ${seed}: ${rows.join(', ')} already in ${args.out}; skipped`)
        continue
      }
      const start = starts.get(`${env}/${seed}`)
      if (!start) throw new Error(`${env} seed ${seed}: its start was not made`)
      const baseId = runId(env, `s${seed}`, 'base')
      const stage1Id = runId(env, `s${seed}`, 'stage1', ...stage1Tag)
      for (const row of todo) {
        const fromStage1 = needsStage1(ALGORITHMS[row])
        const fork = fromStage1 ? { run: stage1Id, at: 'stage1' as const } : { run: baseId, at: 'base' as const }
        const c = config(env, row, seed, { fork, stage1: fromStage1 })
        const id = runId(env, `s${seed}`, rowKey(row), `k${c.stage2.iterations}`, ...(fromStage1 ? stage1Tag : []))
        log(
          `${env} seed ${seed}: ${rowKey(row)}, ${c.stage2.iterations} iterations from ${fromStage1 ? 'Stage 1' : 'the warm-start'}`,
        )
        const result = await runToEnd(client, id, c)
        const rowEntries = await entries(store, result, 'iteration', env)
        const share = await orchestrationShare(client, id, c.stage2.iterations)
        log(
          `  orchestration: ${pct(share.share)} of ${share.iterations} iterations' wall time ` +
            `(${share.orchestrationSeconds.toFixed(1)} s of ${share.wallSeconds.toFixed(1)} s; median iteration ${pct(share.medianShare)})`,
        )
        const results = readResults()
        results[env] ??= {}
        const key = rowKey(row)
        results[env][key] ??= {}
        results[env][key][String(seed)] = [...start.base, ...(fromStage1 ? start.stage1 : []), ...rowEntries]
        writeAtomic(args.out, `${JSON.stringify(results, null, 1)}\n`)
        const diagnostics = join(args.runs, `${env}-${key}-${seed}.json`)
        const iterations = await iterationMetrics(store, id, c.stage2.iterations)
        writeAtomic(
          diagnostics,
          `${JSON.stringify({ runId: id, config: c, orchestration: share, iterations }, null, 1)}\n`,
        )
        const reports = await writeLearningReport(args.out, results)
        log(`${env} seed ${seed}: ${key} written to ${args.out}`)
        // the leg's results, its diagnostics and every report they rewrote, kept whatever happens to the machine
        if (args.commit) commitPaths(`bench:learning: ${env} ${key} seed ${seed}`, [args.out, diagnostics, ...reports])
      }
    }
  }
}

// The worker shuts down on SIGINT and SIGTERM (the Temporal SDK's own handlers); the workflows go on at the server
let interrupted: NodeJS.Signals | undefined
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => (interrupted ??= signal))
try {
  // the starts at one ORT thread (bit-reproducible, so checkable against their record), then the rows
  await withWorker('1', makeStarts)
  if (!args['regenerate-starts']) await withWorker(rowThreads, runRows)
} catch (error) {
  if (!interrupted) throw error
  process.exitCode = 130
  log(
    `interrupted (${interrupted})${current ? `: run ${current} goes on at ${target.connectionOptions.address ?? 'the Temporal server'} without this worker` : ''}; ` +
      'the same command continues (finished legs are skipped, finished runs read, stored phases reused)',
  )
} finally {
  await connection.close()
}
if (!interrupted) log('done')
