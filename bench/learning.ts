// The learning benchmark (issue 6): does SEED beat GRPO on our environments with the built-in tiny model? For
// every (env, seed): one warm-start, one Stage 1 (shared by the SEED rows), then each row's Stage 2 iterations
// from its start checkpoint (the same tasks, rollouts and updates per iteration for every row: the iteration
// seed does not depend on the row), with evaluations on fixed seed ranges of each split. Resumable: an
// (env, row, seed) already in the results file is skipped, and the warm-start and Stage 1 checkpoints and their
// evaluations are cached under .seedflow/bench/learning/. Results go to bench/results/learning.json after each
// (env, row, seed), then the table and plot are rebuilt (bench/learning-report.ts).
// Usage: npm run bench:learning [-- --envs sokoban --rows seed,grpo --seeds 1,2,3 --eval-tasks 1000]
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import {
  annotateStage1,
  type EvaluationResult,
  evaluate,
  evaluationSeed,
  loadPolicy,
  type Policy,
  runIteration,
  toCheckpoint,
  trainStage1,
  warmstart,
} from '../activities/core/index.ts'
import { createLocalEngine } from '../engine/index.ts'
import type { Split } from '../envs/types.ts'
import { type Checkpoint, decodeCheckpoint, encodeCheckpoint } from '../policy/checkpoint.ts'
import { ALGORITHMS, type AlgorithmName, needsLibrary, needsStage1 } from '../seed/algorithms.ts'
import { parseRunConfig, type RunConfig, type RunEnvName } from '../seed/config.ts'
import { cpuPreset } from '../seed/presets/cpu.ts'
import { CHECKPOINT_FILES } from '../store/keys.ts'
import { type LearningEntry, type LearningResults, writeLearningReport } from './learning-report.ts'

/** Rows the benchmark runs: those that evaluate without skills in the prompt. */
const BENCH_ROWS = ['seed', 'grpo', 'seed-static', 'seed-library', 'seed-no-sft'] as const

/**
 * What the benchmark evaluates per environment: the splits of the start and final evaluations (sokoban's
 * test-unseen is its test-seen, the same generator) and tasks per split (the minimums), and the split and
 * tasks of the learning curve's intermediate points.
 */
interface BenchEnv {
  splits: Split[]
  finalTasks: number
  curveSplit: Split
  curveTasks: number
}
const BENCH_ENVS: Partial<Record<RunEnvName, BenchEnv>> = {
  sokoban: { splits: ['validation', 'test-seen'], finalTasks: 1000, curveSplit: 'test-seen', curveTasks: 500 },
  household: {
    splits: ['validation', 'test-seen', 'test-unseen'],
    finalTasks: 300,
    curveSplit: 'test-unseen',
    curveTasks: 100,
  },
  ezpoints: { splits: ['validation', 'test-seen'], finalTasks: 1000, curveSplit: 'test-seen', curveTasks: 500 },
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
    'curve-tasks': { type: 'string' },
    iterations: { type: 'string' },
    out: { type: 'string', default: 'bench/results/learning.json' },
    cache: { type: 'string', default: '.seedflow/bench/learning' },
    threads: { type: 'string', default: '2' },
    /** Stage 2 overrides, `stage2.opdCoef=1`; the row is recorded as `seed[stage2.opdCoef=1]`. */
    set: { type: 'string', multiple: true, default: [] },
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
const curveTasks = (env: RunEnvName) => Number(args['curve-tasks'] ?? benchEnv(env).curveTasks)
for (const row of rows) {
  if (!(BENCH_ROWS as readonly string[]).includes(row)) throw new Error(`--rows: ${row} is not one of ${BENCH_ROWS}`)
}
for (const env of envs) if (!BENCH_ENVS[env]) throw new Error(`--envs: no benchmark settings for ${env}`)

const engine = createLocalEngine({ threads: Number(args.threads) })
const started = performance.now()
const log = (...parts: unknown[]) => console.log(`[${((performance.now() - started) / 1000).toFixed(0)}s]`, ...parts)
const pct = (x: number) => `${(100 * x).toFixed(1)}%`

function readResults(): LearningResults {
  return existsSync(args.out) ? (JSON.parse(readFileSync(args.out, 'utf8')) as LearningResults) : {}
}

function writeAtomic(path: string, text: string): void {
  writeFileSync(`${path}.tmp`, text)
  renameSync(`${path}.tmp`, path)
}

/** `--set stage2.<name>=<number>` overrides (Stage 2 only: the cached warm-start and Stage 1 stay valid). */
const overrides = (args.set ?? []).map((s) => {
  const match = /^stage2\.([A-Za-z]+)=(-?[0-9.eE+-]+)$/.exec(s)
  if (!match) throw new Error(`--set ${s}: expected stage2.<name>=<number>`)
  return { name: match[1] as string, value: Number(match[2]) }
})
/** The row's key in the results: its name, with the overrides it ran under. */
const rowKey = (row: string) => (args.set?.length ? `${row}[${args.set.join(',')}]` : row)

function config(env: RunEnvName, row: AlgorithmName, seed: number): RunConfig {
  const c = cpuPreset(env, row)
  const iterations = args.iterations ? Number(args.iterations) : c.stage2.iterations
  const stage2: Record<string, unknown> = { ...c.stage2, iterations }
  for (const o of overrides) {
    if (typeof stage2[o.name] !== 'number') throw new Error(`--set stage2.${o.name}: not a numeric Stage 2 setting`)
    stage2[o.name] = o.value
  }
  const parsed = parseRunConfig({ ...c, seed, stage2 })
  if (!parsed.ok) throw new Error(`--set: ${parsed.problems.join('; ')}`)
  return parsed.config
}

// ---- cached checkpoints and evaluations (shared by the rows of one env and seed) ----

function saveFolder(dir: string, checkpoint: Checkpoint): void {
  mkdirSync(dir, { recursive: true })
  for (const [file, bytes] of Object.entries(encodeCheckpoint(checkpoint))) writeFileSync(join(dir, file), bytes)
  writeFileSync(join(dir, 'done'), '')
}

function loadFolder(dir: string): Checkpoint | null {
  if (!existsSync(join(dir, 'done'))) return null
  const files: Record<string, Uint8Array> = {}
  for (const f of CHECKPOINT_FILES) if (existsSync(join(dir, f))) files[f] = readFileSync(join(dir, f))
  return decodeCheckpoint(files, dir)
}

/**
 * Guards a cached folder against settings that changed since it was made (a preset edited between sessions):
 * the settings are recorded beside it; a folder made with others is refused, not silently reused. A folder from
 * before this record gets the current settings recorded.
 */
function checkSettings(dir: string, settings: unknown): void {
  const path = join(dir, 'settings.json')
  const now = JSON.stringify(settings)
  if (!existsSync(path)) {
    mkdirSync(dir, { recursive: true })
    writeFileSync(path, now)
    return
  }
  if (readFileSync(path, 'utf8') !== now) {
    throw new Error(`${dir} was made with other settings than the preset's now (${path}); move it away to remake it`)
  }
}

async function cached<T>(path: string, make: () => Promise<T>): Promise<T> {
  if (existsSync(path)) return JSON.parse(readFileSync(path, 'utf8')) as T
  const value = await make()
  mkdirSync(join(path, '..'), { recursive: true })
  writeAtomic(path, JSON.stringify(value))
  return value
}

async function heldOut(policy: Policy, c: RunConfig, split: Split, tasks: number): Promise<EvaluationResult> {
  return evaluate(policy, {
    env: c.env,
    split,
    seedStart: 0,
    tasks,
    temperature: c.evaluation.temperature,
    maxEnvSteps: c.evaluation.maxEnvSteps,
    prompt: c.prompt,
    seed: evaluationSeed(c.seed),
    maxBatch: 256,
  })
}

function entry(r: EvaluationResult, iteration: number, split: Split, checkpoint: LearningEntry['checkpoint']) {
  return { iteration, split, checkpoint, success: r.successRate, score: r.meanScore, episodes: r.tasks }
}

async function evaluateAll(
  policy: Policy,
  c: RunConfig,
  iteration: number,
  checkpoint: LearningEntry['checkpoint'],
): Promise<LearningEntry[]> {
  const out: LearningEntry[] = []
  for (const split of benchEnv(c.env).splits) {
    const r = await heldOut(policy, c, split, evalTasks(c.env))
    log(`  ${checkpoint} ${iteration} on ${split}: ${pct(r.successRate)} ± ${pct(r.standardError)} (${r.tasks} tasks)`)
    out.push(entry(r, iteration, split, checkpoint))
  }
  return out
}

/** The warm-start checkpoint of (env, seed) and its evaluations; made once. */
async function base(env: RunEnvName, seed: number, dir: string) {
  const c = config(env, 'grpo', seed)
  let checkpoint = loadFolder(join(dir, 'base'))
  let stats: unknown = null
  const settings = c.warmstart
  if (!settings) throw new Error(`the ${env} CPU preset has no warm-start`)
  checkSettings(join(dir, 'base'), { model: c.model, prompt: c.prompt, warmstart: settings, evaluation: c.evaluation })
  if (!checkpoint) {
    log(`${env} seed ${seed}: warm-start`)
    const r = await warmstart(engine, {
      env,
      model: c.model as Extract<RunConfig['model'], { kind: 'builtin' }>,
      prompt: c.prompt,
      warmstart: settings,
      analyzer: c.stage2.analyzer,
      evaluation: c.evaluation,
      seed,
      onCheck: (check) => log(`  warm-start step ${check.step}: validation ${pct(check.successRate)}`),
    })
    saveFolder(join(dir, 'base'), r.checkpoint)
    writeFileSync(join(dir, 'base', 'stats.json'), JSON.stringify(r.stats))
    const p = r.stats.polishCheck
    log(
      `  warm-start kept step ${r.stats.keptStep}` +
        (p
          ? `; validation just before the polish ${pct(p.before.success)} (malformed ${pct(p.before.invalidRate)}),` +
            ` after it ${pct(p.after.success)} (malformed ${pct(p.after.invalidRate)})`
          : ''),
    )
    checkpoint = r.checkpoint
    stats = r.stats
  } else {
    stats = JSON.parse(readFileSync(join(dir, 'base', 'stats.json'), 'utf8'))
  }
  const policy = loadPolicy(engine, checkpoint)
  const evaluations = await cached(join(dir, 'base', 'evaluations.json'), () => evaluateAll(policy, c, 0, 'warm-start'))
  await policy.model.release()
  return { checkpoint, stats, evaluations }
}

/** π_0 of (env, seed): Stage 1 from the warm-start; its library (the oracle's annotations); made once. */
async function stage1(env: RunEnvName, seed: number, dir: string, start: Checkpoint) {
  const c = config(env, 'seed', seed)
  const folder = join(dir, 'stage1')
  checkSettings(folder, { stage1: c.stage1 })
  let checkpoint = loadFolder(folder)
  if (!checkpoint) {
    log(`${env} seed ${seed}: Stage 1`)
    const policy = loadPolicy(engine, start)
    const annotation = await annotateStage1(policy, c)
    const sft = await trainStage1(policy, annotation, c)
    checkpoint = toCheckpoint(policy)
    await policy.model.release()
    saveFolder(folder, checkpoint)
    const library = annotation.skills.filter((s) => s.ok).map((s) => s.skill as string)
    writeFileSync(join(folder, 'library.json'), JSON.stringify(library))
    writeFileSync(
      join(folder, 'stats.json'),
      JSON.stringify({ rollout: annotation.rollout, annotation: annotation.annotation, sft }),
    )
    log(`  Stage 1: SFT loss ${sft.firstLoss.toFixed(3)} → ${sft.lastLoss.toFixed(3)}, ${sft.skillPairs} skill pairs`)
  }
  const library = JSON.parse(readFileSync(join(folder, 'library.json'), 'utf8')) as string[]
  const policy = loadPolicy(engine, checkpoint)
  const evaluations = await cached(join(folder, 'evaluations.json'), () => evaluateAll(policy, c, 0, 'stage1'))
  await policy.model.release()
  return { checkpoint, library, evaluations }
}

/** One row's Stage 2 from its start checkpoint; evaluations along the way and at the end. */
async function stage2(
  c: RunConfig,
  start: Checkpoint,
  pi0: Checkpoint | null,
  library: readonly string[],
): Promise<{ entries: LearningEntry[]; iterations: unknown[] }> {
  const row = ALGORITHMS[c.algorithm]
  const policy = loadPolicy(engine, start)
  const reference = loadPolicy(engine, start)
  const fixedAnalyzer = row.analyzer === 'stage1' && pi0 ? loadPolicy(engine, pi0) : undefined
  const entries: LearningEntry[] = []
  const iterations: unknown[] = []
  const { curveSplit } = benchEnv(c.env)
  let optimizerState: Awaited<ReturnType<typeof runIteration>>['optimizerState'] | undefined
  const K = c.stage2.iterations
  for (let k = 0; k < K; k++) {
    const it = await runIteration(
      { policy, reference, ...(fixedAnalyzer ? { stage1: fixedAnalyzer } : {}) },
      {
        config: c,
        iteration: k,
        ...(optimizerState ? { optimizerState } : {}),
        ...(needsLibrary(row) ? { library } : {}),
      },
    )
    optimizerState = it.optimizerState
    const g = it.rescore.teacherGap
    const f = (x: number | null | undefined, d = 3) => (x == null ? '-' : x.toFixed(d))
    log(
      `  ${c.algorithm} it ${k}: train ${pct(it.rollout.successRate)}, invalid ${pct(it.rollout.invalidRate)}, ` +
        `parse ${it.analyze ? f(it.analyze.parse.parseRate, 2) : '-'}, gate ${f(it.update.opdGateMean)}, ` +
        `gap expert ${f(g.expert)} (${g.expertSamples}) other ${f(g.other)} (${g.otherSamples})`,
    )
    iterations.push({ iteration: k, rollout: it.rollout, analyze: it.analyze, rescore: it.rescore, update: it.update })
    const done = k + 1
    if (done < K && curveEvery > 0 && done % curveEvery === 0) {
      const r = await heldOut(policy, c, curveSplit, curveTasks(c.env))
      log(`  ${c.algorithm} after ${done} iterations on ${curveSplit}: ${pct(r.successRate)} (${r.tasks} tasks)`)
      entries.push(entry(r, done, curveSplit, 'iteration'))
    }
  }
  entries.push(...(await evaluateAll(policy, c, K, 'iteration')))
  for (const p of [policy, reference, fixedAnalyzer]) await p?.model.release()
  return { entries, iterations }
}

for (const env of envs) {
  for (const seed of seeds) {
    const todo = rows.filter((row) => !readResults()[env]?.[rowKey(row)]?.[String(seed)])
    if (todo.length === 0) {
      log(`${env} seed ${seed}: ${rows.join(', ')} already in ${args.out}; skipped`)
      continue
    }
    const dir = join(args.cache, env, `seed-${seed}`)
    const warm = await base(env, seed, dir)
    const needsPi0 = todo.some((row) => needsStage1(ALGORITHMS[row]) || needsLibrary(ALGORITHMS[row]))
    const pi0 = needsPi0 ? await stage1(env, seed, dir, warm.checkpoint) : null
    for (const row of todo) {
      const c = config(env, row, seed)
      const fromStage1 = needsStage1(ALGORITHMS[row]) && pi0 !== null
      log(
        `${env} seed ${seed}: ${row}, ${c.stage2.iterations} iterations from ${fromStage1 ? 'Stage 1' : 'the warm-start'}`,
      )
      const run = await stage2(
        c,
        fromStage1 ? pi0.checkpoint : warm.checkpoint,
        pi0?.checkpoint ?? null,
        pi0?.library ?? [],
      )
      const entries = [...warm.evaluations, ...(fromStage1 ? pi0.evaluations : []), ...run.entries]
      const results = readResults()
      results[env] ??= {}
      const key = rowKey(row)
      results[env][key] ??= {}
      results[env][key][String(seed)] = entries
      mkdirSync(join(args.out, '..'), { recursive: true })
      writeAtomic(args.out, `${JSON.stringify(results, null, 1)}\n`)
      const diagnostics = join(join(args.out, '..'), 'learning-runs', `${env}-${rowKey(row)}-${seed}.json`)
      mkdirSync(join(diagnostics, '..'), { recursive: true })
      writeAtomic(diagnostics, `${JSON.stringify({ config: c, iterations: run.iterations }, null, 1)}\n`)
      await writeLearningReport(args.out, results)
      log(`${env} seed ${seed}: ${rowKey(row)} written to ${args.out}`)
    }
  }
}
await engine.close()
log('done')
