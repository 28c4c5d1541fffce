// A micro configuration of the training core: a one-layer model warm-started for a few steps on a dozen
// sokoban demonstrations, so each phase runs in about a second.
import { copyFile, mkdtemp, readFile, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import {
  loadPolicy,
  type Policy,
  sampleTasks,
  type WarmstartInput,
  type WarmstartResult,
  warmstart,
} from '../../compute/index.ts'
import { type IterationPlan, shardTasks } from '../../compute/plan.ts'
import type { RolloutTrajectory } from '../../compute/rollout.ts'
import type { Engine } from '../../engine/index.ts'
import type { Checkpoint } from '../../policy/checkpoint.ts'
import { type RunConfig, runConfig } from '../../seed/config.ts'
import { smokeSokobanPreset } from '../../seed/presets/smoke.ts'

export function microConfig(algorithm: RunConfig['algorithm'] = 'seed'): RunConfig {
  const smoke = smokeSokobanPreset(algorithm)
  return runConfig({
    ...smoke,
    stage2: { ...smoke.stage2, iterations: 1 },
    evaluation: { ...smoke.evaluation, tasks: 4 },
  })
}

/** A micro rollout: 2 train tasks × 2 samples, at most 3 steps, temperature 1, under `config`'s prompt. */
export function microRolloutInput(config: RunConfig, seed: number) {
  return {
    env: config.env,
    tasks: sampleTasks(config.env, 'train', 2, 11),
    groupSize: 2,
    maxEnvSteps: 3,
    temperature: 1,
    prompt: config.prompt,
    seed,
  }
}

/** The warm-start input of a built-in config. */
export function microWarmstartInput(config = microConfig()): WarmstartInput {
  if (config.model.kind !== 'builtin' || !config.warmstart) throw new Error('micro config is built-in')
  return {
    env: config.env,
    model: config.model,
    prompt: config.prompt,
    warmstart: config.warmstart,
    analyzer: config.stage2.analyzer,
    evaluation: config.evaluation,
    seed: config.seed,
  }
}

/** The micro warm-start (deterministic: one thread, fixed seeds). */
export async function microWarmstart(engine: Engine, config = microConfig()): Promise<WarmstartResult> {
  return warmstart(engine, microWarmstartInput(config))
}

/** The micro warm-start checkpoint. */
export async function microCheckpoint(engine: Engine, config = microConfig()): Promise<Checkpoint> {
  return (await microWarmstart(engine, config)).checkpoint
}

export function microPolicy(engine: Engine, checkpoint: Checkpoint): Policy {
  return loadPolicy(engine, checkpoint)
}

/** The engine's random-weight Qwen2 fixture (test/fixtures/reference/qwen2): 2 layers, hidden 32, vocab 320. */
export const QWEN2_FIXTURE = fileURLToPath(new URL('../fixtures/reference/qwen2/', import.meta.url))

/**
 * The context an imported micro run needs with the fixture's 320-token byte-level BPE: compact sokoban step
 * prompts take up to ~335 tokens (~550 with a library skill block), the analyzer prompt ~690 with only its
 * last step, and an oracle answer (the Stage 1 SFT target) ~200. The fixture itself has 64 positions.
 */
export const IMPORTED_CONTEXT = 1024

/**
 * A copy of the Qwen2 fixture whose config.json has `max_position_embeddings` raised to `context`: its 64
 * positions cannot hold even the shortest sokoban step prompt (~230 tokens) or the analyzer's instructions
 * (~600). The weights are the fixture's, byte for byte: rotary positions have no learned parameters, so the
 * model computes the same logits on its first 64 positions and simply goes on past them. The caller removes
 * the folder.
 */
export async function importedFixtureFolder(context = IMPORTED_CONTEXT): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'seedflow-qwen2-'))
  for (const file of ['model.safetensors', 'tokenizer.json', 'tokenizer_config.json', 'generation_config.json']) {
    await copyFile(join(QWEN2_FIXTURE, file), join(dir, file))
  }
  const config = JSON.parse(await readFile(join(QWEN2_FIXTURE, 'config.json'), 'utf8'))
  await writeFile(join(dir, 'config.json'), JSON.stringify({ ...config, max_position_embeddings: context }, null, 2))
  return dir
}

/**
 * The micro configuration on an imported folder: no warm-start, the compact prompt, a step-prompt budget that
 * holds a library skill block, and an analyzer budget that holds the analyzer prompt with its last step plus an
 * oracle answer inside `context` positions.
 */
export function microImportedConfig(
  algorithm: RunConfig['algorithm'],
  folder: string,
  context = IMPORTED_CONTEXT,
): RunConfig {
  const base = microConfig(algorithm)
  return runConfig({
    ...base,
    model: { kind: 'imported', folder, maxPositions: context },
    warmstart: null,
    stage1: { ...base.stage1, actingData: 'rollouts' },
    prompt: { compact: true, compactGrids: true, historyWindow: 1, maxPromptTokens: 600, maxResponseTokens: 24 },
    stage2: { ...base.stage2, analyzer: { maxPromptTokens: 800, maxAnswerTokens: 12 } },
  })
}

/** A rollout shard's episodes as [id, group, task seed]. */
export function shardEpisodes(trajectories: readonly RolloutTrajectory[]): Array<[number, number, number]> {
  return trajectories.map((t) => [t.id, t.group, t.task.seed])
}

/** The episodes the plan gives one rollout shard: its groups' samples, numbered e = group · N + sample. */
export function plannedShardEpisodes(
  plan: IterationPlan,
  shard: number,
  shards: number,
): Array<[number, number, number]> {
  return shardTasks(plan, shard, shards).flatMap((g) =>
    Array.from({ length: plan.groupSize }, (_, s): [number, number, number] => [
      g * plan.groupSize + s,
      g,
      plan.tasks[g]?.seed ?? Number.NaN,
    ]),
  )
}

/** Trajectories carrying only the fields the plan reads (id, group): `groups` × `groupSize`, numbered in order. */
export const planTrajectories = (groups: number, groupSize: number) =>
  Array.from({ length: groups * groupSize }, (_, id) => ({
    id,
    group: Math.floor(id / groupSize),
  })) as RolloutTrajectory[]
