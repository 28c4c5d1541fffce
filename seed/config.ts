// The run configuration: one zod schema for a whole SEED run (docs/design.md §9), the paper's
// per-environment presets for real models (docs/algorithm.md §7) and CPU presets for the built-in tiny model
// (docs/algorithm.md §13, docs/benchmarks.md §8). Pure: no environment or model code is imported, so workflows can
// validate a config at start. The environment names and step caps are mirrored here and kept equal to
// `envs/` by a test.
import { z } from 'zod'
import { ALGORITHM_NAMES, type AlgorithmName } from './algorithms.ts'
import { issueProblems } from './config-problems.ts'

/** The environments of `envs/ENVS` (a test checks the two agree). */
export const RUN_ENV_NAMES = ['sokoban', 'ezpoints', 'household', 'shop', 'searchqa'] as const
export type RunEnvName = (typeof RUN_ENV_NAMES)[number]

/** Each environment's own step cap (`env.maxSteps`); a run may use fewer, never more. */
export const ENV_STEP_CAPS: Record<RunEnvName, number> = {
  sokoban: 15,
  ezpoints: 8,
  household: 30,
  shop: 15,
  searchqa: 4,
}

/** Where a response ends: the closing tag of the environment's answer format (generation stops there). */
export const ENV_STOP_STRINGS: Record<RunEnvName, readonly string[]> = {
  sokoban: ['</action>'],
  ezpoints: ['}'],
  household: ['</action>'],
  shop: ['</action>'],
  searchqa: ['</search>', '</answer>'],
}

/** Longest path of a file or folder in a run configuration (Linux's PATH_MAX). */
export const MAX_PATH_LENGTH = 4096
/** Longest name in a run configuration (an annotator's model name). */
export const MAX_NAME_LENGTH = 256
/** Longest URL in a run configuration (an annotator's endpoint). */
export const MAX_URL_LENGTH = 2048

/** Characters as zod counts them for a length bound: Unicode code points. */
function codePoints(text: string): number {
  let n = text.length
  for (let i = 0; i < text.length - 1; i++) {
    const c = text.charCodeAt(i)
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = text.charCodeAt(i + 1)
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--
        i++
      }
    }
  }
  return n
}

/** The too-long message, without echoing the value (a refusal must stay small: it travels through gRPC). */
const tooLong = (max: number) => ({
  abort: true,
  error: (issue: { input?: unknown }) =>
    `at most ${max} characters, got ${typeof issue.input === 'string' ? codePoints(issue.input) : 'more'}`,
})
const boundedString = (max: number) => z.string().max(max, tooLong(max)).min(1)

const int = (min = 0) => z.number().int().min(min)
const positiveInt = () => z.number().int().positive()
const probability = () => z.number().min(0).max(1)
/** No cap: a learning rate that diverges is caught where it does, by the update's non-finite loss check. */
const lr = () => z.number().positive().finite()
const coefficient = () => z.number().min(0).finite()

/** The built-in decoder's shape (trained from scratch); the vocabulary size comes from the trained tokenizer. */
const BuiltinModel = z.strictObject({
  kind: z.literal('builtin'),
  hiddenSize: positiveInt(),
  intermediateSize: positiveInt(),
  numLayers: positiveInt(),
  numHeads: positiveInt(),
  numKvHeads: positiveInt(),
  headDim: positiveInt(),
  maxPositions: positiveInt(),
  /** Target vocabulary of the byte-level BPE built from environment text (fewer if the text runs out of pairs). */
  vocabSize: z.number().int().min(260),
  /** A learned absolute position table on top of rotary attention (policy/config.ts `learnedPositions`). */
  learnedPositions: z.boolean().default(false),
})

/** A Hugging Face folder (config.json, model.safetensors, tokenizer.json) of a Llama or Qwen2 model. */
const ImportedModel = z.strictObject({
  kind: z.literal('imported'),
  folder: boundedString(MAX_PATH_LENGTH),
  maxPositions: positiveInt(),
})

const PromptSettings = z.strictObject({
  /** The environment's compact prompt (short instructions, at most one history step). */
  compact: z.boolean(),
  /** Grids as one token per cell (`# # O X`) in step prompts, dense rows in analyzer prompts (prompts.ts). */
  compactGrids: z.boolean(),
  /** History entries kept in the step prompt (fewer than the environment renders: the oldest are dropped). */
  historyWindow: int(0),
  /** Most tokens of a step prompt (ordinary or skill-augmented), `max_prompt_length`. */
  maxPromptTokens: positiveInt(),
  /** Most new tokens of one action response. */
  maxResponseTokens: positiveInt(),
})

const Warmstart = z.strictObject({
  /** Train tasks whose expert demonstrations are recorded. */
  demoTasks: positiveInt(),
  /** Share of steps where a random action is executed instead of the expert's (the label stays the expert's). */
  mistakeRate: probability(),
  /** Share of labels replaced by a random action (keeps the clone imperfect). */
  labelNoise: probability(),
  /** Share of demonstration episodes whose prompt carries the oracle skill of the expert's own solution. */
  skillDemoShare: probability(),
  steps: positiveInt(),
  batchSize: positiveInt(),
  lr: lr(),
  warmupSteps: int(0),
  /**
   * Loss weight of the response tokens every demonstrated action shares (the `<think></think><action>` frame);
   * the action's own tokens weigh 1. At 1 (a plain token mean) the tiny model learned the frame and never the
   * action: Adam gives the frame's consistent gradient full steps while the noisy action signal averages out.
   */
  formatTokenWeight: probability().default(1),
  /**
   * Balances the kinds of action (first word) in behaviour cloning: an example weighs its kind's frequency to
   * the power −actionBalance (mean 1). 0: off. For household, where most labels are `go to` and the rare
   * decisions (`take`, `heat`) decide the episode.
   */
  actionBalance: z.number().min(0).max(1).default(0),
  /**
   * Demonstrations think before they act: the expert's sub-goal (e.g. `find apple`) inside `<think>…</think>`,
   * for environments whose expert states one (household); others' thoughts stay empty.
   */
  expertThoughts: z.boolean().default(false),
  /** Steps at full frame weight (and 0.3 × lr) after behaviour cloning, so the frame holds at temperature 1. */
  framePolishSteps: int(0).default(0),
  /**
   * Share of steps on analyzer demonstrations: the oracle's JSON answer to the analyzer prompt of each
   * demonstration episode (the instruct prior a real model brings to Stage 1). 0: Stage 1 teaches it alone.
   */
  analyzerShare: probability().default(0),
  /** Batch size of the analyzer steps (their sequences are ~5 times longer than an acting step's). */
  analyzerBatchSize: positiveInt().default(32),
  /** Evaluate every this many steps on validation tasks and stop once `targetSuccess` is reached (0: never). */
  evalEvery: int(0),
  evalTasks: positiveInt(),
  targetSuccess: probability(),
  /**
   * Keep the weights of the best validation check (the latest of equals) instead of the last step's: household's
   * clone peaked at step 900 of 1,200 (16% → 2–6% at T = 0.4 in two runs) while its loss kept falling.
   */
  keepBest: z.boolean().default(false),
})

const Stage1 = z.strictObject({
  /** Train tasks rolled out with the base policy, `samplesPerTask` each. */
  tasks: positiveInt(),
  samplesPerTask: positiveInt(),
  temperature: z.number().positive(),
  maxEnvSteps: positiveInt(),
  annotator: z.discriminatedUnion('kind', [
    z.strictObject({ kind: z.literal('oracle') }),
    z.strictObject({
      kind: z.literal('openai'),
      baseUrl: z.url().max(MAX_URL_LENGTH, tooLong(MAX_URL_LENGTH)),
      model: boundedString(MAX_NAME_LENGTH),
      maxRetries: int(0),
      maxTokens: positiveInt(),
    }),
  ]),
  steps: positiveInt(),
  batchSize: positiveInt(),
  lr: lr(),
  warmupSteps: int(0),
  /** Share of each SFT batch taken from acting data (step prompt → action) so acting is not forgotten. */
  actingMix: probability(),
  /**
   * The acting data: `rollouts`, the annotated rollouts' well-formed steps (the base policy's own samples); or
   * `demonstrations`, a replay of the warm-start's demonstrations (plain and skill-reading ones, built-in models
   * only), which keeps the policy able to read a skill in its prompt (the teacher's role).
   */
  actingData: z.enum(['rollouts', 'demonstrations']).default('rollouts'),
})

const Analyzer = z.strictObject({
  /** Most tokens of the analyzer prompt; the oldest steps are left out to fit. */
  maxPromptTokens: positiveInt(),
  /** Most new tokens of the analyzer's answer (the skill JSON). */
  maxAnswerTokens: positiveInt(),
})

export const Stage2Schema = z.strictObject({
  iterations: int(0),
  /** Tasks per RL step (B); each is rolled out `groupSize` times (N), the group sharing the task seed. */
  tasksPerStep: positiveInt(),
  groupSize: positiveInt(),
  maxEnvSteps: positiveInt(),
  temperature: z.number().positive(),
  lr: lr(),
  weightDecay: coefficient(),
  maxGradNorm: z.number().positive(),
  /** Step samples per PPO mini-batch (one AdamW step each); `ppo_epochs` = 1. */
  miniBatchSize: positiveInt(),
  clipLow: z.number().gt(0).lt(1),
  clipHigh: z.number().gt(0),
  clipRatioC: z.number().gt(1),
  klCoef: coefficient(),
  entropyCoef: coefficient(),
  opdCoef: coefficient(),
  opdBeta: z.number().positive(),
  advantageMode: z.enum(['mean', 'meanStd']),
  /** `steps`: the code's pooled step statistics (unbiased std); `trajectories`: the paper's (population std). */
  advantageStatistics: z.enum(['steps', 'trajectories']),
  /**
   * Scale each step sample's advantage by (mean trajectory length / its trajectory's length), so every episode
   * weighs the same (docs/benchmarks.md §8, pitfall 3). Off in the paper presets.
   */
  perEpisodeWeight: z.boolean(),
  aggregation: z.enum(['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum']),
  invalidPenalty: coefficient(),
  analyzer: Analyzer,
})

const Evaluation = z.strictObject({
  split: z.enum(['validation', 'test-seen', 'test-unseen']),
  /** Held-out tasks are the seeds [seedStart, seedStart + tasks). */
  seedStart: int(0),
  tasks: positiveInt(),
  temperature: z.number().positive(),
  maxEnvSteps: positiveInt(),
  /** Evaluate every this many Stage 2 iterations (0: only the start and the end). */
  every: int(0),
})

/** Which iteration checkpoints a run keeps (docs/design.md §5.4); the base and Stage 1 checkpoints are always kept. */
const Retention = z.strictObject({
  /** The last N iteration checkpoints are kept (the newest one is the next iteration's acting policy). */
  keepLast: positiveInt().default(3),
  /** Keep the checkpoint with the highest held-out success. */
  keepBest: z.boolean().default(true),
  /** Keep every checkpoint that was evaluated. */
  keepEvaluated: z.boolean().default(true),
  /** Drop optimizer.safetensors from every checkpoint but the newest (only the next update reads it). */
  optimizerStateOnlyForLast: z.boolean().default(true),
})

export const RETENTION_DEFAULTS: Readonly<z.infer<typeof Retention>> = Object.freeze(Retention.parse({}))

export const RunConfigSchema = z
  .strictObject({
    env: z.enum(RUN_ENV_NAMES),
    algorithm: z.enum(ALGORITHM_NAMES as [AlgorithmName, ...AlgorithmName[]]),
    model: z.discriminatedUnion('kind', [BuiltinModel, ImportedModel]),
    prompt: PromptSettings,
    /** Only for the built-in model (an imported model starts from its own weights); null to skip. */
    warmstart: Warmstart.nullable(),
    stage1: Stage1,
    stage2: Stage2Schema,
    evaluation: Evaluation,
    /** Root of every seed of the run (task sampling, rollouts, initialization). */
    seed: int(0),
    /** ORT intra-op threads of in-process runs (scripts, benches); a worker uses SEEDFLOW_ORT_THREADS. 1 makes runs bit-reproducible. */
    threads: positiveInt(),
    /** Absent or partial: the defaults (keep the last 3, the best and every evaluated one; optimizer for the last). */
    retention: Retention.prefault({}),
  })
  .superRefine((c, ctx) => {
    const problem = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path, message })
    const cap = ENV_STEP_CAPS[c.env]
    for (const [path, steps] of [
      [['stage1', 'maxEnvSteps'], c.stage1.maxEnvSteps],
      [['stage2', 'maxEnvSteps'], c.stage2.maxEnvSteps],
      [['evaluation', 'maxEnvSteps'], c.evaluation.maxEnvSteps],
    ] as const) {
      if (steps > cap) problem([...path], `${steps} exceeds ${c.env}'s step cap of ${cap}`)
    }
    const positions = c.model.maxPositions
    if (c.prompt.maxPromptTokens + c.prompt.maxResponseTokens > positions) {
      problem(
        ['prompt', 'maxPromptTokens'],
        `prompt ${c.prompt.maxPromptTokens} + response ${c.prompt.maxResponseTokens} tokens exceed the model's ${positions} positions`,
      )
    }
    const analyzer = c.stage2.analyzer
    if (analyzer.maxPromptTokens + analyzer.maxAnswerTokens > positions) {
      problem(
        ['stage2', 'analyzer', 'maxPromptTokens'],
        `analyzer prompt ${analyzer.maxPromptTokens} + answer ${analyzer.maxAnswerTokens} tokens exceed the model's ${positions} positions`,
      )
    }
    if (c.model.kind === 'builtin') {
      const m = c.model
      if (m.numHeads % m.numKvHeads !== 0)
        problem(['model', 'numKvHeads'], `numHeads ${m.numHeads} is not a multiple of numKvHeads ${m.numKvHeads}`)
      if (m.headDim % 2 !== 0) problem(['model', 'headDim'], `rotary needs an even head size, got ${m.headDim}`)
      if (c.warmstart === null)
        problem(['warmstart'], 'the built-in model trains from scratch: it needs warm-start settings')
    } else if (c.warmstart !== null) {
      problem(['warmstart'], 'an imported model starts from its own weights: set warmstart to null')
    }
    if (c.stage1.actingData === 'demonstrations' && c.warmstart === null)
      problem(['stage1', 'actingData'], 'demonstrations replays the warm-start, which this run does not have')
    if (c.stage2.miniBatchSize > c.stage2.tasksPerStep * c.stage2.groupSize * c.stage2.maxEnvSteps) {
      problem(
        ['stage2', 'miniBatchSize'],
        `${c.stage2.miniBatchSize} samples per mini-batch is more than one iteration can produce ` +
          `(${c.stage2.tasksPerStep} tasks × ${c.stage2.groupSize} samples × ${c.stage2.maxEnvSteps} steps)`,
      )
    }
    if (c.stage1.annotator.kind === 'openai')
      problem(['stage1', 'annotator', 'kind'], 'the OpenAI-compatible annotator is not implemented yet; use oracle')
  })

export type RunConfig = z.infer<typeof RunConfigSchema>
export type Stage2Config = RunConfig['stage2']
export type PromptSettings = RunConfig['prompt']
export type WarmstartConfig = z.infer<typeof Warmstart>
export type Stage1Config = RunConfig['stage1']
export type EvaluationConfig = RunConfig['evaluation']
export type RetentionConfig = RunConfig['retention']
export type BuiltinModelConfig = z.infer<typeof BuiltinModel>
export type ImportedModelConfig = z.infer<typeof ImportedModel>

export type ParsedRunConfig = { ok: true; config: RunConfig } | { ok: false; problems: string[] }

/**
 * Validates a run config; every problem as `path: reason` (the path dotted, `(root)` for the whole object). An
 * unknown field is reported as `stage2.lrr: unknown field (did you mean stage2.lr?)`. Each line is at most
 * MAX_PROBLEM_LENGTH characters (a marked cut) and at most MAX_PROBLEMS lines are listed, so a refusal never
 * echoes a huge value.
 */
export function parseRunConfig(input: unknown): ParsedRunConfig {
  const parsed = RunConfigSchema.safeParse(input)
  if (parsed.success) return { ok: true, config: parsed.data }
  return { ok: false, problems: issueProblems(RunConfigSchema, input, parsed.error.issues) }
}

export class RunConfigError extends Error {
  override name = 'RunConfigError'
  constructor(readonly problems: readonly string[]) {
    super(`invalid run config: ${problems.join('; ')}`)
  }
}

/** The config, or a RunConfigError listing every problem. */
export function runConfig(input: unknown): RunConfig {
  const parsed = parseRunConfig(input)
  if (!parsed.ok) throw new RunConfigError(parsed.problems)
  return parsed.config
}

// ---- presets ----

/** docs/algorithm.md §7 per environment: B / N, max steps, history, prompt length, mini-batch, adv mode, KL. */
const PAPER_ENV: Record<
  RunEnvName,
  {
    tasksPerStep: number
    groupSize: number
    maxEnvSteps: number
    historyWindow: number
    maxPromptTokens: number
    miniBatchSize: number
    advantageMode: 'mean' | 'meanStd'
    klCoef: number
    entropyCoef: number
    iterations: number
    evalTasks: number
    evalEvery: number
    /** analysis_context_length (24576 for Sokoban). */
    analyzerContext: number
  }
> = {
  household: paperEnv(16, 8, 30, 5, 2048, 256, 'meanStd', 0.01, 160, 128, 16384),
  shop: paperEnv(16, 8, 15, 2, 4096, 64, 'mean', 0.01, 160, 128, 16384),
  searchqa: { ...paperEnv(128, 8, 4, 4, 4096, 512, 'meanStd', 0.001, 150, 512, 16384), entropyCoef: 0 },
  sokoban: paperEnv(32, 8, 15, 2, 1024, 64, 'meanStd', 0.01, 150, 128, 24576),
  ezpoints: paperEnv(16, 8, 8, 0, 1024, 128, 'meanStd', 0.01, 100, 128, 16384),
}

function paperEnv(
  tasksPerStep: number,
  groupSize: number,
  maxEnvSteps: number,
  historyWindow: number,
  maxPromptTokens: number,
  miniBatchSize: number,
  advantageMode: 'mean' | 'meanStd',
  klCoef: number,
  iterations: number,
  evalTasks: number,
  analyzerContext: number,
) {
  return {
    tasksPerStep,
    groupSize,
    maxEnvSteps,
    historyWindow,
    maxPromptTokens,
    miniBatchSize,
    advantageMode,
    klCoef,
    entropyCoef: 0.001,
    iterations,
    evalTasks,
    evalEvery: 5,
    analyzerContext,
  }
}

/**
 * The paper's Stage 2 settings for a real model (docs/algorithm.md §7 and §2 for Stage 1) on `env`, with an
 * imported model folder. Real models skip the warm-start.
 */
export function paperPreset(env: RunEnvName, folder: string, algorithm: AlgorithmName = 'seed'): RunConfig {
  const p = PAPER_ENV[env]
  const responseTokens = 512
  return runConfig({
    env,
    algorithm,
    model: { kind: 'imported', folder, maxPositions: 32768 },
    prompt: {
      compact: false,
      compactGrids: false,
      historyWindow: p.historyWindow,
      maxPromptTokens: p.maxPromptTokens,
      maxResponseTokens: responseTokens,
    },
    warmstart: null,
    stage1: {
      tasks: 180,
      samplesPerTask: 8,
      temperature: 0.4,
      maxEnvSteps: p.maxEnvSteps,
      annotator: { kind: 'oracle' },
      steps: 540, // 3 epochs of 1,440 trajectories at batch 8
      batchSize: 8,
      lr: 5e-6,
      warmupSteps: 54,
      actingMix: 0,
    },
    stage2: {
      iterations: p.iterations,
      tasksPerStep: p.tasksPerStep,
      groupSize: p.groupSize,
      maxEnvSteps: p.maxEnvSteps,
      temperature: 1,
      lr: 1e-6,
      weightDecay: 0.01,
      maxGradNorm: 1,
      miniBatchSize: p.miniBatchSize,
      clipLow: 0.2,
      clipHigh: 0.2,
      clipRatioC: 3,
      klCoef: p.klCoef,
      entropyCoef: p.entropyCoef,
      opdCoef: 0.01,
      opdBeta: 5,
      advantageMode: p.advantageMode,
      advantageStatistics: 'steps',
      perEpisodeWeight: false,
      aggregation: 'token-mean',
      invalidPenalty: 0.1,
      analyzer: { maxPromptTokens: p.analyzerContext, maxAnswerTokens: 4096 },
    },
    evaluation: {
      split: 'test-seen',
      seedStart: 0,
      tasks: p.evalTasks,
      temperature: 0.4,
      maxEnvSteps: p.maxEnvSteps,
      every: p.evalEvery,
    },
    seed: 0,
    threads: 2,
  })
}

/**
 * The built-in tiny model on Sokoban, sized for 2 CPU cores (docs/benchmarks.md §8): a ~0.7M-parameter decoder, the
 * compact prompt with one token per grid cell (~180 tokens), skill-augmented prompts (~310) and analyzer prompts
 * (oldest steps dropped past 400 tokens) inside 640 positions; behaviour cloning stopped early so that RL starts
 * from an imperfect policy; lr and per-episode weighting from the prototype, not the paper.
 */
export function cpuSokobanPreset(algorithm: AlgorithmName = 'seed'): RunConfig {
  return runConfig({
    env: 'sokoban',
    algorithm,
    model: {
      kind: 'builtin',
      hiddenSize: 128,
      intermediateSize: 384,
      numLayers: 3,
      numHeads: 4,
      numKvHeads: 2,
      headDim: 32,
      maxPositions: 640,
      vocabSize: 1024,
      learnedPositions: true,
    },
    prompt: { compact: true, compactGrids: false, historyWindow: 0, maxPromptTokens: 400, maxResponseTokens: 24 },
    warmstart: {
      demoTasks: 3000,
      mistakeRate: 0.25,
      labelNoise: 0.25,
      skillDemoShare: 0.3,
      steps: 240,
      batchSize: 256,
      lr: 1e-3,
      warmupSteps: 20,
      formatTokenWeight: 0.01,
      framePolishSteps: 30,
      evalEvery: 40,
      evalTasks: 128,
      targetSuccess: 0.3,
    },
    stage1: {
      tasks: 48,
      samplesPerTask: 4,
      temperature: 1,
      maxEnvSteps: 15,
      annotator: { kind: 'oracle' },
      // with the base policy's own steps as acting data, 300 steps at 1e-3 taught the skill JSON but took
      // acting from 38% to 23% and the skill-reading the teacher needs with it; replaying the warm-start's
      // demonstrations keeps both (measured on 128 validation tasks: acting 38% → 51%, parse rate 0.75)
      steps: 300,
      batchSize: 32,
      lr: 1e-3,
      warmupSteps: 5,
      actingMix: 0.5,
      actingData: 'demonstrations',
    },
    stage2: {
      iterations: 12,
      tasksPerStep: 16,
      groupSize: 8,
      maxEnvSteps: 15,
      temperature: 1,
      lr: 2e-4,
      weightDecay: 0.01,
      maxGradNorm: 1,
      miniBatchSize: 512,
      clipLow: 0.2,
      clipHigh: 0.2,
      clipRatioC: 3,
      klCoef: 0.01,
      entropyCoef: 0.001,
      opdCoef: 0.01,
      opdBeta: 5,
      advantageMode: 'meanStd',
      advantageStatistics: 'steps',
      perEpisodeWeight: true,
      aggregation: 'token-mean',
      invalidPenalty: 0.1,
      analyzer: { maxPromptTokens: 400, maxAnswerTokens: 120 },
    },
    evaluation: {
      split: 'test-seen',
      seedStart: 0,
      tasks: 500,
      temperature: 0.4,
      maxEnvSteps: 15,
      every: 0,
    },
    seed: 1,
    threads: 2,
  })
}

/**
 * A smoke run on Sokoban: a one-layer model warm-started for a few steps, every phase of every stage on tiny
 * sizes, three iterations: a run finishes in about a minute and learns nothing. For trying out the operations
 * (workers, pause, retry, audit) and for tests.
 */
export function smokeSokobanPreset(algorithm: AlgorithmName = 'seed'): RunConfig {
  const base = cpuSokobanPreset(algorithm)
  return runConfig({
    ...base,
    model: {
      kind: 'builtin',
      hiddenSize: 32,
      intermediateSize: 64,
      numLayers: 1,
      numHeads: 2,
      numKvHeads: 1,
      headDim: 16,
      maxPositions: 640,
      vocabSize: 600,
    },
    warmstart: { ...base.warmstart, demoTasks: 12, steps: 3, batchSize: 8, evalEvery: 0, framePolishSteps: 2 },
    stage1: { ...base.stage1, tasks: 2, samplesPerTask: 2, maxEnvSteps: 3, steps: 2, batchSize: 4 },
    stage2: {
      ...base.stage2,
      iterations: 3,
      tasksPerStep: 2,
      groupSize: 2,
      maxEnvSteps: 3,
      miniBatchSize: 4,
      analyzer: { maxPromptTokens: 400, maxAnswerTokens: 12 },
    },
    evaluation: { ...base.evaluation, tasks: 16, maxEnvSteps: 3 },
    threads: 1,
  })
}

/**
 * The built-in tiny model on household (ALFWorld-like), sized for 2 CPU cores. The expert searches from what the
 * agent sees (envs/README.md; ~13 steps a task), the compact prompt is ~160 tokens (task, last action, admissible
 * commands, observation). Behaviour cloning: batch 64 at lr 2e-3, the frame at weight 0.3 (the action is 3–8
 * tokens here, not sokoban's one), label noise 0.05 (the search keeps the clone imperfect). Measured on 48–96
 * validation tasks (2 cores, two runs sharing them): after 600 steps 2% success; after 1,200 steps (~50 min
 * shared) 4% at T = 0.4 and 8–16% at T = 1, where greedy decoding takes every decision of the expert's path but
 * "take" (go 64%, open 99%, move 82%, heat/cool/clean 100%, take 0%; sampled at T = 1, take 25%). Balancing
 * action kinds (`actionBalance` 0.5) did worse at 600 steps (go 40%, move 45%, take 0%). RL starts from the
 * T = 1 successes. Demonstrations think the expert's sub-goal first (`<think>find apple</think>`, expertThoughts):
 * after 600 steps 2.1% at T = 0.4 and 7.3% at T = 1 on 96 tasks (without thoughts 2% and 0%); the thoughts come
 * out right, but greedy "take" stays at 0% and actions still miscopy object numbers. Stage 2 is sized to at most
 * 1,440 step samples an iteration (6 tasks × 8 samples × 30 steps): four GRPO iterations from the 1,200-step
 * checkpoint (without thoughts) took ~65 s each and raised rollout success from 0% to 17% (48 episodes each).
 * The warm-start keeps its best validation check (keepBest; the 64-task checks swing by 10+ points between
 * checkpoints 300 steps apart). In bench:learning (three seeds) the clone starts at 3–10% (T = 0.4, 300 tasks),
 * Stage 1 (replaying the demonstrations at lr 1e-3) lowers that on two seeds of three, and `seed` ends at 16.7%
 * test-unseen on average, `grpo` at 15.9% (docs/benchmarks.md §3.2).
 */
export function cpuHouseholdPreset(algorithm: AlgorithmName = 'seed'): RunConfig {
  const sokoban = cpuSokobanPreset(algorithm)
  return runConfig({
    ...sokoban,
    env: 'household',
    prompt: { compact: true, compactGrids: false, historyWindow: 1, maxPromptTokens: 320, maxResponseTokens: 24 },
    warmstart: {
      demoTasks: 3000,
      mistakeRate: 0.25,
      labelNoise: 0.05,
      skillDemoShare: 0.3,
      expertThoughts: true,
      keepBest: true,
      steps: 1200,
      batchSize: 64,
      lr: 2e-3,
      warmupSteps: 20,
      formatTokenWeight: 0.3,
      framePolishSteps: 30,
      evalEvery: 300,
      evalTasks: 64,
      targetSuccess: 0.3,
    },
    stage1: { ...sokoban.stage1, tasks: 32, maxEnvSteps: 30 },
    stage2: {
      ...sokoban.stage2,
      tasksPerStep: 6,
      groupSize: 8,
      maxEnvSteps: 30,
      miniBatchSize: 256,
      analyzer: { maxPromptTokens: 480, maxAnswerTokens: 160 },
    },
    evaluation: { ...sokoban.evaluation, tasks: 300, maxEnvSteps: 30 },
  })
}

/** The CPU preset of `env` for the built-in tiny model; only environments with a tuned one. */
export const CPU_PRESETS: Partial<Record<RunEnvName, (algorithm: AlgorithmName) => RunConfig>> = {
  sokoban: cpuSokobanPreset,
  household: cpuHouseholdPreset,
}

export function cpuPreset(env: RunEnvName, algorithm: AlgorithmName = 'seed'): RunConfig {
  const preset = CPU_PRESETS[env]
  if (!preset) {
    throw new Error(`no CPU preset for ${env} yet (CPU presets: ${Object.keys(CPU_PRESETS).join(', ')})`)
  }
  return preset(algorithm)
}
