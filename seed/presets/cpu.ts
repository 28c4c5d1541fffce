// The CPU presets: the built-in tiny model (trained from scratch) sized for 2 CPU cores (docs/algorithm.md §13,
// docs/benchmarks.md §8), for the environments with a tuned one. Each is the config a user would write, less the
// algorithm; household starts from Sokoban's and sets what differs.
import type { AlgorithmName } from '../algorithms.ts'
import { type RunConfig, type RunConfigInput, type RunEnvName, runConfig } from '../config.ts'

/** A preset as written: a whole run config but the algorithm, which its preset function takes. */
export type PresetInput = Omit<RunConfigInput, 'algorithm'>

/**
 * The built-in tiny model on Sokoban, sized for 2 CPU cores (docs/benchmarks.md §8): a ~0.7M-parameter decoder, the
 * compact prompt with one token per grid cell (~180 tokens), skill-augmented prompts (~310) and analyzer prompts
 * (oldest steps dropped past 400 tokens) inside 640 positions; behaviour cloning stopped early so that RL starts
 * from an imperfect policy; lr and per-episode weighting from the prototype, not the paper.
 */
export const CPU_SOKOBAN = {
  env: 'sokoban',
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
} as const satisfies PresetInput

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
 * test-unseen on average, `grpo` at 15.9% (README "Learning benchmark").
 */
const CPU_HOUSEHOLD = {
  ...CPU_SOKOBAN,
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
  stage1: { ...CPU_SOKOBAN.stage1, tasks: 32, maxEnvSteps: 30 },
  stage2: {
    ...CPU_SOKOBAN.stage2,
    tasksPerStep: 6,
    groupSize: 8,
    maxEnvSteps: 30,
    miniBatchSize: 256,
    analyzer: { maxPromptTokens: 480, maxAnswerTokens: 160 },
  },
  evaluation: { ...CPU_SOKOBAN.evaluation, tasks: 300, maxEnvSteps: 30 },
} as const satisfies PresetInput

/** The built-in tiny model on Sokoban (CPU_SOKOBAN). */
export function cpuSokobanPreset(algorithm: AlgorithmName = 'seed'): RunConfig {
  return runConfig({ ...CPU_SOKOBAN, algorithm })
}

/** The built-in tiny model on household (CPU_HOUSEHOLD). */
export function cpuHouseholdPreset(algorithm: AlgorithmName = 'seed'): RunConfig {
  return runConfig({ ...CPU_HOUSEHOLD, algorithm })
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
