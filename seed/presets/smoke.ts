// The smoke preset: every phase of every stage on tiny sizes, for trying out the operations and for tests.
import type { AlgorithmName } from '../algorithms.ts'
import { type RunConfig, runConfig } from '../config.ts'
import { CPU_SOKOBAN, type PresetInput } from './cpu.ts'

/**
 * A smoke run on Sokoban: a one-layer model warm-started for a few steps, every phase of every stage on tiny
 * sizes, three iterations: a run finishes in about a minute and learns nothing. For trying out the operations
 * (workers, pause, retry, audit) and for tests. The CPU Sokoban preset with smaller sizes.
 */
const SMOKE_SOKOBAN = {
  ...CPU_SOKOBAN,
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
  warmstart: { ...CPU_SOKOBAN.warmstart, demoTasks: 12, steps: 3, batchSize: 8, evalEvery: 0, framePolishSteps: 2 },
  stage1: { ...CPU_SOKOBAN.stage1, tasks: 2, samplesPerTask: 2, maxEnvSteps: 3, steps: 2, batchSize: 4 },
  stage2: {
    ...CPU_SOKOBAN.stage2,
    iterations: 3,
    tasksPerStep: 2,
    groupSize: 2,
    maxEnvSteps: 3,
    miniBatchSize: 4,
    analyzer: { maxPromptTokens: 400, maxAnswerTokens: 12 },
  },
  evaluation: { ...CPU_SOKOBAN.evaluation, tasks: 16, maxEnvSteps: 3 },
  threads: 1,
} as const satisfies PresetInput

/** The smoke run on Sokoban (SMOKE_SOKOBAN). */
export function smokeSokobanPreset(algorithm: AlgorithmName = 'seed'): RunConfig {
  return runConfig({ ...SMOKE_SOKOBAN, algorithm })
}
