// The paper's presets for a real model (docs/algorithm.md §7; Stage 1 from docs/algorithm.md §2): one imported model folder,
// no warm-start, the settings all environments share, and a table of what each environment sets itself.
import type { AlgorithmName } from '../algorithms.ts'
import { type RunConfig, type RunConfigInput, type RunEnvName, runConfig } from '../config.ts'

type Input = Omit<RunConfigInput, 'env' | 'algorithm' | 'model'>

/** The step prompt of every environment (the full prompt, dense grids); the history and its length are per env. */
const PROMPT = { compact: false, compactGrids: false, maxResponseTokens: 512 } satisfies Partial<Input['prompt']>

/** Stage 1 of every environment (the rollouts' step cap is the environment's). */
const STAGE1 = {
  tasks: 180,
  samplesPerTask: 8,
  temperature: 0.4,
  annotator: { kind: 'oracle' },
  steps: 540, // 3 epochs of 1,440 trajectories at batch 8
  batchSize: 8,
  lr: 5e-6,
  warmupSteps: 54,
  actingMix: 0,
} satisfies Omit<Input['stage1'], 'maxEnvSteps'>

/** Stage 2 settings every environment shares (docs/algorithm.md §7). */
const STAGE2 = {
  temperature: 1,
  lr: 1e-6,
  weightDecay: 0.01,
  maxGradNorm: 1,
  clipLow: 0.2,
  clipHigh: 0.2,
  clipRatioC: 3,
  opdCoef: 0.01,
  opdBeta: 5,
  advantageStatistics: 'steps',
  perEpisodeWeight: false,
  aggregation: 'token-mean',
} satisfies Partial<Input['stage2']>

/** The analyzer of the text environments: analysis_context_length 16384, answers up to 4096 tokens. */
const ANALYZER = { maxPromptTokens: 16384, maxAnswerTokens: 4096 } satisfies Input['stage2']['analyzer']
/** The analyzer of the visual ones (Sokoban, EZPoints): answers up to 2048 tokens. */
const VISUAL_ANALYZER = { ...ANALYZER, maxAnswerTokens: 2048 } satisfies Input['stage2']['analyzer']

/** Evaluation on seen test tasks (how many and how often, test_freq, are per env). */
const EVALUATION = {
  split: 'test-seen',
  seedStart: 0,
  temperature: 0.4,
} satisfies Partial<Input['evaluation']>

interface PaperEnv {
  /** The step cap of Stage 1's rollouts, Stage 2's and the evaluation's. */
  maxEnvSteps: number
  prompt: Pick<Input['prompt'], 'historyWindow' | 'maxPromptTokens'>
  stage2: Pick<
    Input['stage2'],
    | 'iterations'
    | 'tasksPerStep'
    | 'groupSize'
    | 'miniBatchSize'
    | 'advantageMode'
    | 'klCoef'
    | 'entropyCoef'
    | 'invalidPenalty'
    | 'analyzer'
  >
  evaluation: Pick<Input['evaluation'], 'tasks' | 'every'>
}

/**
 * docs/algorithm.md §7 per environment: max steps, history, prompt length, updates, B / N, mini-batch, adv mode,
 * KL, entropy, invalid-action penalty, analyzer budgets, val batch size and test_freq.
 */
const PAPER_ENVS: Record<RunEnvName, PaperEnv> = {
  household: {
    maxEnvSteps: 30,
    prompt: { historyWindow: 5, maxPromptTokens: 2048 },
    stage2: {
      iterations: 150, // the updates the ALFWorld runs made (the launcher says 160 epochs)
      tasksPerStep: 16,
      groupSize: 8,
      miniBatchSize: 256,
      advantageMode: 'meanStd',
      klCoef: 0.01,
      entropyCoef: 0.001,
      invalidPenalty: 0.1,
      analyzer: ANALYZER,
    },
    evaluation: { tasks: 128, every: 5 },
  },
  shop: {
    maxEnvSteps: 15,
    prompt: { historyWindow: 2, maxPromptTokens: 4096 },
    stage2: {
      iterations: 160,
      tasksPerStep: 16,
      groupSize: 8,
      miniBatchSize: 64,
      advantageMode: 'mean',
      klCoef: 0.01,
      entropyCoef: 0.001,
      invalidPenalty: 0.1,
      analyzer: ANALYZER,
    },
    evaluation: { tasks: 128, every: 5 },
  },
  searchqa: {
    maxEnvSteps: 4,
    prompt: { historyWindow: 4, maxPromptTokens: 4096 },
    stage2: {
      iterations: 150,
      tasksPerStep: 128,
      groupSize: 8,
      miniBatchSize: 512,
      advantageMode: 'meanStd',
      klCoef: 0.001,
      entropyCoef: 0,
      invalidPenalty: 0.01, // rewards are 1/0 here, not 10/0
      analyzer: ANALYZER,
    },
    evaluation: { tasks: 512, every: 150 },
  },
  sokoban: {
    maxEnvSteps: 15,
    prompt: { historyWindow: 2, maxPromptTokens: 1024 },
    stage2: {
      iterations: 150,
      tasksPerStep: 32,
      groupSize: 8,
      miniBatchSize: 64,
      advantageMode: 'meanStd',
      klCoef: 0.01,
      entropyCoef: 0.001,
      invalidPenalty: 0.1,
      analyzer: { ...VISUAL_ANALYZER, maxPromptTokens: 24576 }, // analysis_context_length 24576 for Sokoban
    },
    evaluation: { tasks: 128, every: 5 },
  },
  ezpoints: {
    maxEnvSteps: 8,
    prompt: { historyWindow: 0, maxPromptTokens: 1024 },
    stage2: {
      iterations: 100,
      tasksPerStep: 16,
      groupSize: 8,
      miniBatchSize: 128,
      advantageMode: 'meanStd',
      klCoef: 0.01,
      entropyCoef: 0.001,
      invalidPenalty: 0.1,
      analyzer: VISUAL_ANALYZER,
    },
    evaluation: { tasks: 128, every: 5 },
  },
}

/** The context the paper's Qwen2.5 models run with. */
const PAPER_CONTEXT = 32768

/**
 * The paper's Stage 2 settings for a real model (docs/algorithm.md §7; Stage 1 from docs/algorithm.md §2) on `env`, with an
 * imported model folder. Real models skip the warm-start. `modelPositions` (the folder's max_position_embeddings)
 * caps the context: a model with fewer positions than the paper's 32,768 (SmolLM2: 8,192) gets that many, and
 * the analyzer's prompt and answer budgets shrink to fit in it (the answer keeps at most a quarter).
 */
export function paperPreset(
  env: RunEnvName,
  folder: string,
  algorithm: AlgorithmName = 'seed',
  modelPositions = PAPER_CONTEXT,
): RunConfig {
  const { maxEnvSteps, prompt, stage2, evaluation } = PAPER_ENVS[env]
  const positions = Math.min(PAPER_CONTEXT, modelPositions)
  const budget = stage2.analyzer
  const answer = Math.min(budget.maxAnswerTokens, Math.floor(positions / 4))
  const analyzer = { maxAnswerTokens: answer, maxPromptTokens: Math.min(budget.maxPromptTokens, positions - answer) }
  return runConfig({
    env,
    algorithm,
    model: { kind: 'imported', folder, maxPositions: positions },
    prompt: { ...PROMPT, ...prompt },
    warmstart: null,
    stage1: { ...STAGE1, maxEnvSteps },
    stage2: { ...STAGE2, ...stage2, maxEnvSteps, analyzer },
    evaluation: { ...EVALUATION, ...evaluation, maxEnvSteps },
    seed: 0,
    threads: 2,
  } satisfies RunConfigInput)
}
