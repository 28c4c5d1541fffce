// A micro configuration of the training core: a one-layer model warm-started for a few steps on a dozen
// sokoban demonstrations, so each phase runs in about a second.
import { loadPolicy, type Policy, warmstart } from '../../../activities/core/index.ts'
import type { Engine } from '../../../engine/index.ts'
import type { Checkpoint } from '../../../policy/checkpoint.ts'
import { cpuSokobanPreset, type RunConfig, runConfig } from '../../../seed/config.ts'

export function microConfig(algorithm: RunConfig['algorithm'] = 'seed'): RunConfig {
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
    warmstart: { ...base.warmstart, demoTasks: 12, steps: 3, batchSize: 8, evalEvery: 0 },
    stage1: { ...base.stage1, tasks: 2, samplesPerTask: 2, maxEnvSteps: 3, steps: 2, batchSize: 4 },
    stage2: {
      ...base.stage2,
      iterations: 1,
      tasksPerStep: 2,
      groupSize: 2,
      maxEnvSteps: 3,
      miniBatchSize: 4,
      analyzer: { maxPromptTokens: 400, maxAnswerTokens: 12 },
    },
    evaluation: { ...base.evaluation, tasks: 4, maxEnvSteps: 3 },
    threads: 1,
  })
}

/** The micro warm-start checkpoint (deterministic: one thread, fixed seeds). */
export async function microCheckpoint(engine: Engine, config = microConfig()): Promise<Checkpoint> {
  if (config.model.kind !== 'builtin' || !config.warmstart) throw new Error('micro config is built-in')
  const r = await warmstart(engine, {
    env: config.env,
    model: config.model,
    prompt: config.prompt,
    warmstart: config.warmstart,
    evaluation: config.evaluation,
    seed: config.seed,
  })
  return r.checkpoint
}

export function microPolicy(engine: Engine, checkpoint: Checkpoint): Policy {
  return loadPolicy(engine, checkpoint)
}
