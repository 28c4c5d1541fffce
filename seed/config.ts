// The run configuration: one zod schema for a whole SEED run (docs/design.md §9), its types, and parseRunConfig /
// runConfig. Pure: no environment or model code is imported, so workflows can validate a config at start. The
// environment names and step caps are mirrored here and kept equal to `envs/` by a test. The presets (the
// paper's, the CPU ones, the smoke run) are in seed/presets/.
import { z } from 'zod'
import { LORA_TARGETS } from '../policy/lora-targets.ts'
import { ALGORITHM_NAMES, ALGORITHMS, type AlgorithmName } from './algorithms.ts'
import {
  boundedString,
  coefficient,
  ENV_NAME_PATTERN,
  int,
  lr,
  MAX_NAME_LENGTH,
  MAX_PATH_LENGTH,
  MAX_URL_LENGTH,
  positiveInt,
  probability,
  tooLong,
} from './config-fields.ts'
import { issueProblems } from './config-problems.ts'
import { envLabel, envStepCap, envVarName, RunEnvSchema } from './env-config.ts'
import { OPD_GATES } from './losses.ts'

export { ENV_NAME_PATTERN, MAX_NAME_LENGTH, MAX_PATH_LENGTH, MAX_URL_LENGTH } from './config-fields.ts'
export * from './env-config.ts'

/**
 * LoRA adapters (policy/lora.ts): Stage 1 SFT and the Stage 2 updates train rank-`rank` adapters on the `targets`
 * projections with the base weights frozen, scaled by alpha / rank; checkpoints carry the adapters in PEFT's
 * layout. Defaults are PEFT's LoraConfig defaults (r 8, lora_alpha 8, dropout 0, q_proj + v_proj for Llama).
 * The built-in model's warm-start trains every weight (it starts from random weights); an imported model's
 * warm-start trains the adapters, which Stage 1 and Stage 2 then go on training.
 */
const Lora = z.strictObject({
  rank: positiveInt().default(8),
  alpha: z.number().positive().finite().default(8),
  dropout: z
    .number()
    .min(0)
    .max(0, 'LoRA dropout is not implemented (the train graphs have no dropout): set model.lora.dropout to 0')
    .default(0),
  targets: z
    .array(z.enum(LORA_TARGETS))
    .min(1)
    .refine((t) => new Set(t).size === t.length, 'each target at most once')
    .default(['q_proj', 'v_proj']),
})

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
  lora: Lora.optional(),
})

/** A Hugging Face folder (config.json, model.safetensors, tokenizer.json) of a Llama or Qwen2 model. */
const ImportedModel = z.strictObject({
  kind: z.literal('imported'),
  folder: boundedString(MAX_PATH_LENGTH),
  maxPositions: positiveInt(),
  lora: Lora.optional(),
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
  /**
   * How an over-long prompt (step, teacher or analyzer) is fitted into its budget (docs/algorithm.md §13):
   * `drop-oldest` (the default) drops whole history entries (analyzer steps), oldest first, then the whole skill
   * block, never cutting the task line or the skill; `left` (the reference's) tokenizes the full prompt with the
   * chat template and cuts its leftmost tokens, so the chat header, the task line and the skill go first.
   */
  truncation: z.enum(['drop-oldest', 'left']).default('drop-oldest'),
})

/**
 * Behaviour cloning on the environment's expert demonstrations before Stage 1: the built-in model's from random
 * weights and a tokenizer trained on the demonstrations; an imported model's from its own weights with its own
 * tokenizer and chat template (for an instruct model too weak to act at all: with no success, GRPO has nothing
 * to work with).
 */
const Warmstart = z.strictObject({
  /** Train tasks whose expert demonstrations are recorded. */
  demoTasks: positiveInt(),
  /** Share of steps where a random action is executed instead of the expert's (the label stays the expert's). */
  mistakeRate: probability(),
  /** Share of labels replaced by a random action (keeps the clone imperfect). */
  labelNoise: probability(),
  /** Share of demonstration episodes whose prompt carries the oracle skill of the expert's own solution. */
  skillDemoShare: probability(),
  /**
   * Contrastive skill reading (docs/benchmarks.md §3.8): each skill-reading task is played twice from its first
   * state, each step taking a random action instead of the expert's with this probability, and kept when won; its
   * labels are its own moves, which its oracle skill lists. So one state comes with skills that demand different
   * actions, and the only way to fit them is to read the skill. Absent or 0: the expert's own solution, once.
   */
  skillDetours: probability().optional(),
  /**
   * Share of skill-reading steps also shown blind: the same skill and label, the prompt without its observation
   * and history (envs PromptOptions.blind), so that only the skill says the move (issue 46). Absent or 0: none.
   */
  skillBlind: probability().optional(),
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
   * Demonstrations from a file instead of the environment's expert: one JSON object a line, `{prompt, response}`
   * (the step prompt as the environment renders it, the response to clone), read on the worker; its sha256 is an
   * input of the warm-start. For an environment without an expert (a server without /expert_action). The clone's
   * mistakes and label noise do not apply, and it has no skill-reading or analyzer demonstrations (skillDemoShare
   * and analyzerShare 0).
   */
  demonstrationsFile: boundedString(MAX_PATH_LENGTH).optional(),
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
    /**
     * An OpenAI-compatible chat completions endpoint (docs/operations.md, "The external analyzer"); the defaults
     * are the reference's annotation settings (temperature 0, at most 1,024 new tokens, up to 5 retries).
     */
    z.strictObject({
      kind: z.literal('openai'),
      /** The API root, e.g. `http://127.0.0.1:8080/v1`; no credentials in it (the key comes from `apiKeyEnv`). */
      baseUrl: z.url({ protocol: /^https?$/ }).max(MAX_URL_LENGTH, tooLong(MAX_URL_LENGTH)),
      model: boundedString(MAX_NAME_LENGTH),
      /** The environment variable that holds the API key, read on the worker when it annotates; never stored. */
      apiKeyEnv: envVarName().default('OPENAI_API_KEY'),
      /** Requests in flight at once. */
      concurrency: positiveInt().default(4),
      /** Per request (one HTTP attempt). */
      timeoutSeconds: z.number().positive().finite().default(120),
      /** Retries of a request after a 408, 409, 429, 5xx, timeout or connection error (Retry-After honoured). */
      maxRetries: int(0).default(5),
      temperature: z.number().min(0).finite().default(0),
      maxTokens: positiveInt().default(1024),
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
   * `demonstrations`, a replay of the warm-start's demonstrations (plain and skill-reading ones; a run with a
   * warm-start only), which keeps the policy able to read a skill in its prompt (the teacher's role).
   */
  actingData: z.enum(['rollouts', 'demonstrations']).default('rollouts'),
  /**
   * Below this share of annotated trajectories (the annotator's requests failed or its answers did not parse),
   * Stage 1 (and `annotate`) stops and the run waits for an operator with the counts, instead of training on a
   * library that is mostly empty. 0 accepts any.
   */
  minAnnotatedShare: probability().default(0.5),
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
  /**
   * b in l = (g − b)·(t − s) (a deviation from the paper, which has b = 0): the gate's constant part raises every
   * sampled token alike, which on on-policy samples is 0 in expectation and noise in a batch; 0.5, the gate of a
   * teacher that agrees with the student, leaves the expected gradient and centres the push (docs/algorithm.md §6.3).
   */
  opdGateBaseline: z.number().min(0).lt(1).default(0),
  /**
   * What the OPD gate compares the teacher with: `student` (the reference) or `control`, π_old reading another
   * task's skill block, so the gate measures what this skill adds over any skill (docs/algorithm.md §6.3).
   */
  opdGate: z.enum(OPD_GATES).default('student'),
  /**
   * A diagnostic: score every teacher sample under another task's block too (the control prompt, as the `control`
   * gate does) and record the control gap log π_teacher − log π_control, whatever the gate. It changes no update
   * (the `student` gate never reads it) and costs one more scoring pass of the teacher samples. Absent: off.
   */
  controlGap: z.boolean().optional(),
  /**
   * Where the oracle teacher (`skillSource: oracle`, the `seed-oracle` row) plans from: `start`, the expert's
   * solution from the task's first state, one block for every step; `step`, at each step the moves the student
   * made so far, then the expert's solution from the step's own state, so the plan holds where the student is
   * (docs/benchmarks.md §3.8: off the expert's path the `start` plan is stale). Absent: `start`.
   */
  oraclePlan: z.enum(['start', 'step']).optional(),
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
  /**
   * seedflow's guard: log π_θ − log π_old (PPO) and ref − log π_θ (k3 KL) clamped to ±20 before exp, so a float32
   * overflow never makes a gradient NaN. false: the reference's plain exp (docs/algorithm.md §6.2, §6.4).
   */
  clampLogRatios: z.boolean().default(true),
  /**
   * The reference's padding: random step samples (seeded) are duplicated until the iteration's samples are a
   * multiple of `miniBatchSize`, before advantages, so the copies enter the group statistics and the loss.
   * false (seedflow's default): no copies, the last mini-batch is smaller (docs/algorithm.md §3).
   */
  padToMiniBatch: z.boolean().default(false),
  /**
   * Stage-1 examples mixed into every update (a deviation from the paper, docs/algorithm.md §3): after the RL pass,
   * `steps` supervised steps on analyzer answers (the run's Stage 1 annotations: analyzer prompt → skill JSON) and
   * skill-reading demonstrations (expert solutions whose prompt carries their oracle skill, as the warm-start's), so
   * that the analyzer keeps writing skills that parse and the teacher keeps reading them. null: off (the paper).
   */
  stage1Mix: z
    .strictObject({
      steps: positiveInt(),
      batchSize: positiveInt(),
      lr: lr(),
      /** Share of the steps on analyzer answers; the rest are on skill-reading demonstrations. */
      analyzerShare: probability(),
    })
    .nullable()
    .default(null),
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
  /**
   * More held-out splits, evaluated at the start checkpoints (base, Stage 1) and at the end only, beside the
   * periodic one above (same temperature and step cap); each split once.
   */
  splits: z
    .array(
      z.strictObject({
        split: z.enum(['validation', 'test-seen', 'test-unseen']),
        /** Tasks are the seeds [seedStart, seedStart + tasks); default 0. */
        seedStart: int(0).optional(),
        tasks: positiveInt(),
      }),
    )
    .max(8)
    .optional(),
})

/** A run that starts from another run's stored checkpoint instead of making its own base. */
const Fork = z.strictObject({
  /** The run id of the run to fork (its store must be this run's store). */
  run: boundedString(MAX_NAME_LENGTH),
  /**
   * `base`: its base checkpoint (this run then makes its own Stage 1 where its row needs one); `stage1`: its
   * Stage 1 checkpoint and skill library (π_0; Stage 1 is not rerun); `{ iteration: k }`: the checkpoint that
   * ends its iteration k, with its optimizer state, KL reference and analyzer (this run goes on at k + 1).
   */
  at: z.union([z.enum(['base', 'stage1']), z.strictObject({ iteration: int(0) })]),
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

/**
 * How the policy's graphs run (speed and memory, not results): every switch leaves every computed value the
 * same up to float32 rounding (docs/benchmarks.md §6.4, §6.5).
 */
const EngineSettings = z.strictObject({
  /**
   * Rebuild each decoder layer from its input in the backward pass instead of keeping its activations (gradient
   * checkpointing): SmolLM2's 8 × 512 train step peaks at 3.4 GiB instead of 10.9, for about one more forward pass.
   */
  recomputeLayers: z.boolean().default(false),
  /**
   * Rollout decoding with the weights fed to every run (`inputs`), or baked into pre-packed sessions once per
   * policy version (`frozen`: less CPU per token, a session load per version; not with LoRA adapters).
   */
  decodeWeights: z.enum(['inputs', 'frozen']).default('inputs'),
  /**
   * Each optimizer step over a batch of more sequences than this runs as micro-batches of at most this many, their
   * gradients summed in the engine before the one AdamW step (gradient accumulation, weighted by tokens): the
   * same step up to float32 rounding, with the activations of one micro-batch (docs/benchmarks.md §2). Absent:
   * the whole batch at once.
   */
  microBatchSize: positiveInt().optional(),
})

export const ENGINE_DEFAULTS: Readonly<z.infer<typeof EngineSettings>> = Object.freeze(EngineSettings.parse({}))

export const RETENTION_DEFAULTS: Readonly<z.infer<typeof Retention>> = Object.freeze(Retention.parse({}))

export const RunConfigSchema = z
  .strictObject({
    env: RunEnvSchema,
    algorithm: z.enum(ALGORITHM_NAMES as [AlgorithmName, ...AlgorithmName[]]),
    model: z.discriminatedUnion('kind', [BuiltinModel, ImportedModel]),
    prompt: PromptSettings,
    /** Required for the built-in model; optional for an imported one (null: it starts from its own weights). */
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
    /** Absent or partial: layers kept, decode weights fed (ENGINE_DEFAULTS). */
    engine: EngineSettings.prefault({}),
    /** Start from another run's checkpoint (the fork phase copies it into this run); absent: make the base. */
    fork: Fork.optional(),
  })
  .superRefine((c, ctx) => {
    const problem = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path, message })
    const cap = envStepCap(c.env)
    for (const [path, steps] of [
      [['stage1', 'maxEnvSteps'], c.stage1.maxEnvSteps],
      [['stage2', 'maxEnvSteps'], c.stage2.maxEnvSteps],
      [['evaluation', 'maxEnvSteps'], c.evaluation.maxEnvSteps],
    ] as const) {
      if (steps > cap) problem([...path], `${steps} exceeds ${envLabel(c.env)}'s step cap of ${cap}`)
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
    }
    if (c.engine.decodeWeights === 'frozen' && c.model.lora)
      problem(
        ['engine', 'decodeWeights'],
        'frozen decode sessions carry the base weights alone: with model.lora, decode with weights fed (inputs)',
      )
    if (c.stage2.stage1Mix) {
      if (ALGORITHMS[c.algorithm].start !== 'stage1-sft')
        problem(
          ['stage2', 'stage1Mix'],
          `mixes in Stage 1's annotations, which algorithm ${c.algorithm} does not make (it starts from the base)`,
        )
      if (c.stage2.stage1Mix.analyzerShare < 1 && c.warmstart === null)
        problem(
          ['stage2', 'stage1Mix', 'analyzerShare'],
          'skill-reading demonstrations follow the warm-start settings, which this run does not have: set analyzerShare to 1',
        )
    }
    const ws = c.warmstart
    if (ws?.demonstrationsFile !== undefined)
      for (const share of ['skillDemoShare', 'analyzerShare'] as const)
        if (ws[share] > 0)
          problem(
            ['warmstart', share],
            `demonstrations from a file have no oracle skills or analyzer answers: set ${share} to 0`,
          )
    if (c.stage1.actingData === 'demonstrations' && c.warmstart === null)
      problem(['stage1', 'actingData'], 'demonstrations replays the warm-start, which this run does not have')
    if (c.stage2.miniBatchSize > c.stage2.tasksPerStep * c.stage2.groupSize * c.stage2.maxEnvSteps) {
      problem(
        ['stage2', 'miniBatchSize'],
        `${c.stage2.miniBatchSize} samples per mini-batch is more than one iteration can produce ` +
          `(${c.stage2.tasksPerStep} tasks × ${c.stage2.groupSize} samples × ${c.stage2.maxEnvSteps} steps)`,
      )
    }
    const splits = [c.evaluation.split, ...(c.evaluation.splits ?? []).map((s) => s.split)]
    splits.forEach((split, i) => {
      if (splits.indexOf(split) !== i)
        problem(['evaluation', 'splits', i - 1, 'split'], `${split} is evaluated already; each split once`)
    })
    if (c.fork && typeof c.fork.at === 'object' && c.fork.at.iteration >= c.stage2.iterations)
      problem(
        ['fork', 'at', 'iteration'],
        `iteration ${c.fork.at.iteration} is not before stage2.iterations ${c.stage2.iterations}: nothing would be left to run`,
      )
    if (c.stage1.annotator.kind === 'openai') {
      const url = new URL(c.stage1.annotator.baseUrl)
      if (url.username || url.password)
        problem(['stage1', 'annotator', 'baseUrl'], 'no credentials in the URL: name the key in apiKeyEnv')
    }
  })

export type RunConfig = z.infer<typeof RunConfigSchema>
/** A run config as written, before defaults are filled in (what a preset is; runConfig turns it into a RunConfig). */
export type RunConfigInput = z.input<typeof RunConfigSchema>
export type Stage2Config = RunConfig['stage2']
export type PromptSettings = RunConfig['prompt']
export type WarmstartConfig = z.infer<typeof Warmstart>
export type Stage1Config = RunConfig['stage1']
export type OpenAIAnnotatorConfig = Extract<Stage1Config['annotator'], { kind: 'openai' }>
export type EvaluationConfig = RunConfig['evaluation']
export type RetentionConfig = RunConfig['retention']
export type BuiltinModelConfig = z.infer<typeof BuiltinModel>
export type ImportedModelConfig = z.infer<typeof ImportedModel>
export type LoraSettings = z.infer<typeof Lora>
export type EngineSettingsConfig = z.infer<typeof EngineSettings>

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
