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
    // acting data: the warm-start's demonstrations, which keep acting and skill-reading (docs/benchmarks.md §2)
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
  // the train steps in micro-batches of 32 sequences: the warm-start's 256-sequence step peaked at 6.4 GiB whole,
  // 1.9 GiB in micro-batches, and ran faster (docs/benchmarks.md §2)
  engine: { microBatchSize: 32 },
  seed: 1,
  threads: 2,
} as const satisfies PresetInput

/**
 * The built-in tiny model on household (ALFWorld-like), sized for 2 CPU cores: the expert searches from what the
 * agent sees (envs/README.md), a compact prompt of ~160 tokens, behaviour cloning with the expert's sub-goal as the
 * thought, kept at its best validation check; Stage 2 at most 1,440 step samples an iteration. What it reaches:
 * docs/benchmarks.md §3.7.
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
