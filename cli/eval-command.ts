// `seedflow eval`: evaluates one checkpoint (a folder, a store key, or a run's iteration) on held-out tasks
// without a Temporal server, through the same core `evaluate` as the `evaluate` activity, and prints a table
// whose numbers are the JSON's.
import { writeFile } from 'node:fs/promises'
import {
  type Estimate,
  type EvaluationAggregates,
  type EvaluationTaskRecord,
  evaluate,
  evaluationSeed,
  evaluationSkills,
  loadPolicy,
  type Policy,
} from '../compute/index.ts'
import { formatSkillGap, type SkillGapResult, skillGap } from '../compute/skill-gap.ts'
import { createLocalEngine } from '../engine/index.ts'
import { localPaths } from '../infra/local-stack.ts'
import type { Checkpoint } from '../policy/checkpoint.ts'
import { readSkillLibrary } from '../records/skill-library.ts'
import { ALGORITHM_NAMES, ALGORITHMS, type AlgorithmName } from '../seed/algorithms.ts'
import {
  ENV_STEP_CAPS,
  envLabel,
  type PromptSettings,
  RUN_ENV_NAMES,
  type RunConfig,
  type RunEnvName,
} from '../seed/config.ts'
import { cpuSokobanPreset } from '../seed/presets/cpu.ts'
import { paperPreset } from '../seed/presets/paper.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { storeFromEnv } from '../store/from-env.ts'
import { type CheckpointSource, describeSource, resolveCheckpoint } from './checkpoint-source.ts'
import { RunInputError } from './run-checkpoint.ts'

export const EVAL_SPLITS = ['validation', 'test-seen', 'test-unseen'] as const
type EvalSplit = (typeof EVAL_SPLITS)[number]

export interface EvalOptions {
  run?: string
  iteration?: string
  env?: string
  split: string
  seeds?: string
  episodes?: number
  temperature: number
  algorithmRow?: string
  out?: string
  threads?: number
  seed?: number
  /** The premise check instead of the success evaluation (skillGapCommand). */
  skillGap?: boolean
}

/** A bad flag or an unknown checkpoint, run or iteration: the CLI prints the message and exits 1. */
export const EvalInputError = RunInputError

/** Where the evaluated checkpoint came from, as the JSON records it. */
export type EvalCheckpointSource = CheckpointSource

export interface EvalReport {
  checkpoint: EvalCheckpointSource
  /** The environment's name (a server's: the run config's `env.name`, else `http:<host:port>`). */
  env: string
  split: EvalSplit
  /** Task seeds [from, to): half-open. */
  seeds: { from: number; to: number }
  temperature: number
  /** The row whose evaluation skill was used (null: no skill in the prompt). */
  algorithmRow: AlgorithmName | null
  /** Where the prompt settings and the step cap came from: `run <id>` or `preset <name>`. */
  settings: { source: string; prompt: PromptSettings; maxEnvSteps: number }
  samplingSeed: number
  tasks: EvaluationTaskRecord[]
  aggregates: EvaluationAggregates
  seconds: number
}

/** `<from>:<to>`, half-open: `0:100` is seeds 0 … 99. */
export function parseSeedRange(text: string): { from: number; to: number } {
  const m = /^(\d+):(\d+)$/.exec(text.trim())
  const from = m ? Number(m[1]) : Number.NaN
  const to = m ? Number(m[2]) : Number.NaN
  if (!m || !Number.isSafeInteger(from) || !Number.isSafeInteger(to) || to <= from) {
    throw new EvalInputError(
      `bad seed range ${JSON.stringify(text)}: use <from>:<to> with from < to (half-open: 0:100 is seeds 0 … 99)`,
    )
  }
  return { from, to }
}

/** Prompt settings and step cap of a checkpoint outside any run: the env's preset for its kind of model. */
function presetSettings(env: RunEnvName, builtin: boolean, location: string) {
  if (builtin) {
    const cpu = cpuSokobanPreset()
    return env === 'sokoban'
      ? { source: 'preset cpu-sokoban', prompt: cpu.prompt, maxEnvSteps: cpu.evaluation.maxEnvSteps }
      : {
          source: `preset cpu-sokoban (prompt settings), ${env}'s step cap`,
          prompt: cpu.prompt,
          maxEnvSteps: ENV_STEP_CAPS[env],
        }
  }
  const paper = paperPreset(env, location)
  return { source: `preset paper-${env}`, prompt: paper.prompt, maxEnvSteps: paper.evaluation.maxEnvSteps }
}

const pct = (x: number | null) => (x === null ? '   n/a' : `${(100 * x).toFixed(1)}%`)
const num = (x: number | null, digits: number) => (x === null ? 'n/a' : x.toFixed(digits))

function ciText(e: Estimate, format: (x: number | null) => string): string {
  return e.low === null || e.high === null ? '' : `[${format(e.low)}, ${format(e.high)}]`
}

/** The table `seedflow eval` prints: success per family and overall, macro average, score, length, invalid rate. */
export function formatEvaluationTable(a: EvaluationAggregates): string {
  const rows: Array<[string, string, string, string]> = [['', 'tasks', 'value', '95% CI']]
  for (const [family, f] of Object.entries(a.perFamily))
    rows.push([`success ${family}`, String(f.tasks), pct(f.success.value), ciText(f.success, pct)])
  rows.push(['success overall', String(a.tasks), pct(a.success.value), ciText(a.success, pct)])
  rows.push(['success macro', String(a.tasks), pct(a.macroSuccess.value), ciText(a.macroSuccess, pct)])
  const d3 = (x: number | null) => num(x, 3)
  const d2 = (x: number | null) => num(x, 2)
  rows.push(['mean score', String(a.tasks), d3(a.score.value), ciText(a.score, d3)])
  rows.push(['mean length', String(a.tasks), d2(a.length.value), ciText(a.length, d2)])
  rows.push(['invalid rate', String(a.tasks), pct(a.invalidRate.value), ciText(a.invalidRate, pct)])
  const width = (i: 0 | 1 | 2) => Math.max(...rows.map((r) => r[i].length))
  const [w0, w1, w2] = [width(0), width(1), width(2)]
  return rows
    .map(([label, tasks, value, ci]) =>
      `  ${label.padEnd(w0)}  ${tasks.padStart(w1)}  ${value.padStart(w2)}  ${ci}`.trimEnd(),
    )
    .join('\n')
}

export interface EvalIo {
  out(text: string): void
  err(text: string): void
}

const STDIO: EvalIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
}

/** `body` with the checkpoint loaded on an engine of its own, both released after. */
async function withPolicy<T>(
  ckpt: Checkpoint,
  options: EvalOptions,
  runConfig: RunConfig | undefined,
  body: (policy: Policy) => Promise<T>,
): Promise<T> {
  const engine = createLocalEngine(options.threads ? { threads: options.threads } : {})
  const policy = loadPolicy(engine, ckpt, runConfig ? { settings: runConfig.engine } : {})
  try {
    return await body(policy)
  } finally {
    await policy.trainer.release()
    await engine.close()
  }
}

/** What both `seedflow eval` and its premise check settle first: the flags checked, the checkpoint and settings. */
async function prepareEval(checkpoint: string | undefined, options: EvalOptions) {
  if (!(EVAL_SPLITS as readonly string[]).includes(options.split))
    throw new EvalInputError(`unknown split ${JSON.stringify(options.split)}; one of ${EVAL_SPLITS.join(', ')}`)
  const split = options.split as EvalSplit
  if (options.env !== undefined && !(RUN_ENV_NAMES as readonly string[]).includes(options.env))
    throw new EvalInputError(`unknown env ${JSON.stringify(options.env)}; one of ${RUN_ENV_NAMES.join(', ')}`)
  if (options.seeds !== undefined && options.episodes !== undefined)
    throw new EvalInputError('give --seeds <from>:<to> or --episodes <n>, not both')
  const range = options.seeds !== undefined ? parseSeedRange(options.seeds) : undefined
  if (options.algorithmRow !== undefined && !(ALGORITHM_NAMES as string[]).includes(options.algorithmRow))
    throw new EvalInputError(
      `unknown algorithm row ${JSON.stringify(options.algorithmRow)}; one of ${ALGORITHM_NAMES.join(', ')}`,
    )
  if (!(options.temperature > 0)) throw new EvalInputError(`--temperature must be positive, got ${options.temperature}`)

  let store: ArtifactStore | undefined
  const storeOnce = () => {
    store ??= storeFromEnv(localPaths().artifacts)
    return store
  }
  const resolved = await resolveCheckpoint(checkpoint, options, storeOnce)
  const runConfig = resolved.run?.config
  if (runConfig && options.env !== undefined && options.env !== runConfig.env)
    throw new EvalInputError(
      `--env ${options.env} does not match run ${resolved.run?.id}, which trained on ${envLabel(runConfig.env)}`,
    )
  // a run's environment may be a server (env.kind "http"): evaluated on it as the run was
  const envName = (options.env as RunEnvName | undefined) ?? runConfig?.env
  if (envName === undefined)
    throw new EvalInputError(`give --env (${RUN_ENV_NAMES.join(', ')}): the checkpoint belongs to no run`)

  const rowName = (options.algorithmRow ?? runConfig?.algorithm) as AlgorithmName | undefined
  const row = rowName ? ALGORITHMS[rowName] : undefined
  if (row?.evaluationSkill === 'library' && !resolved.run)
    throw new EvalInputError(
      `--algorithm-row ${rowName} puts Stage 1 library skills in the evaluation prompt, which needs a run's ` +
        'annotations: give --run <id> (or a checkpoint key under runs/<id>/)',
    )

  const ckpt = await resolved.load()
  const settings = runConfig
    ? { source: `run ${resolved.run?.id}`, prompt: runConfig.prompt, maxEnvSteps: runConfig.evaluation.maxEnvSteps }
    : presetSettings(envName as RunEnvName, ckpt.tokenizerConfig === undefined, resolved.source.location)
  const seeds =
    range ??
    (options.episodes !== undefined
      ? { from: 0, to: options.episodes }
      : runConfig
        ? { from: runConfig.evaluation.seedStart, to: runConfig.evaluation.seedStart + runConfig.evaluation.tasks }
        : { from: 0, to: cpuSokobanPreset().evaluation.tasks })
  const tasks = seeds.to - seeds.from
  const samplingSeed = evaluationSeed(options.seed ?? runConfig?.seed ?? cpuSokobanPreset().seed)
  const library =
    row?.evaluationSkill === 'library' && resolved.run
      ? await readSkillLibrary(storeOnce(), resolved.run.id, rowName as string)
      : null
  return { split, resolved, envName, rowName, ckpt, settings, seeds, tasks, samplingSeed, library, runConfig }
}

export async function evalCommand(
  checkpoint: string | undefined,
  options: EvalOptions,
  io: EvalIo = STDIO,
): Promise<EvalReport> {
  const { split, resolved, envName, rowName, ckpt, settings, seeds, tasks, samplingSeed, library, runConfig } =
    await prepareEval(checkpoint, options)
  const where = describeSource(resolved.source)
  io.err(
    `seedflow: evaluating ${where} on ${envLabel(envName)} ${split}, seeds ${seeds.from}:${seeds.to} (${tasks} tasks), ` +
      `temperature ${options.temperature}, ${library ? `library skills of row ${rowName}` : 'no skill in the prompt'}; ` +
      `prompt settings from ${settings.source}\n`,
  )
  const started = performance.now()
  let lastLine = started
  const result = await withPolicy(ckpt, options, runConfig, (policy) =>
    evaluate(policy, {
      env: envName,
      split,
      seedStart: seeds.from,
      tasks,
      temperature: options.temperature,
      maxEnvSteps: settings.maxEnvSteps,
      prompt: settings.prompt,
      seed: samplingSeed,
      ...(library ? { skills: evaluationSkills(library.skills, tasks, samplingSeed) } : {}),
      onProgress: (finished, episodes) => {
        const now = performance.now()
        if (now - lastLine < 5000) return
        lastLine = now
        io.err(`seedflow: ${finished}/${episodes} episodes finished (${((now - started) / 1000).toFixed(0)} s)\n`)
      },
    }),
  )
  const report: EvalReport = {
    checkpoint: resolved.source,
    env: envLabel(envName),
    split,
    seeds,
    temperature: options.temperature,
    algorithmRow: library ? (rowName as AlgorithmName) : null,
    settings,
    samplingSeed,
    tasks: result.records,
    aggregates: result.aggregates,
    seconds: result.seconds,
  }
  io.out(
    `\n${envLabel(envName)} ${split}, seeds ${seeds.from}:${seeds.to}, temperature ${options.temperature} ` +
      `(prompt settings from ${settings.source}):\n${formatEvaluationTable(result.aggregates)}\n\n`,
  )
  if (options.out) {
    await writeFile(options.out, `${JSON.stringify(report, null, 2)}\n`)
    io.out(`seedflow: wrote ${options.out}\n`)
  }
  return report
}

export interface SkillGapReport {
  checkpoint: EvalCheckpointSource
  env: string
  split: EvalSplit
  seeds: { from: number; to: number }
  settings: { source: string; prompt: PromptSettings }
  result: SkillGapResult
}

/**
 * `seedflow eval --skill-gap`: the premise check of the checkpoint (compute/skill-gap.ts) on the same tasks, instead
 * of sampling episodes: does the policy read what a skill says?
 */
export async function skillGapCommand(
  checkpoint: string | undefined,
  options: EvalOptions,
  io: EvalIo = STDIO,
): Promise<SkillGapReport> {
  const { split, resolved, envName, ckpt, settings, seeds, tasks, runConfig } = await prepareEval(checkpoint, options)
  io.err(
    `seedflow: premise check of ${describeSource(resolved.source)} on ${envLabel(envName)} ${split}, seeds ` +
      `${seeds.from}:${seeds.to} (${tasks} tasks): the expert's responses scored with each task's oracle skill, ` +
      `another task's and none; prompt settings from ${settings.source}\n`,
  )
  let lastLine = performance.now()
  const result = await withPolicy(ckpt, options, runConfig, (policy) =>
    skillGap(policy, {
      env: envName,
      split,
      seedStart: seeds.from,
      tasks,
      prompt: settings.prompt,
      thoughts: runConfig?.warmstart?.expertThoughts ?? false,
      onProgress: (done, of) => {
        if (performance.now() - lastLine < 5000) return
        lastLine = performance.now()
        io.err(`seedflow: ${done}/${of} prompts scored\n`)
      },
    }),
  )
  const report: SkillGapReport = {
    checkpoint: resolved.source,
    env: envLabel(envName),
    split,
    seeds,
    settings: { source: settings.source, prompt: settings.prompt },
    result,
  }
  io.out(`\n${formatSkillGap(result)}\n`)
  if (options.out) {
    await writeFile(options.out, `${JSON.stringify(report, null, 2)}\n`)
    io.out(`seedflow: wrote ${options.out}\n`)
  }
  return report
}
