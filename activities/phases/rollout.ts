// Rollout, one shard: the shard's tasks of the iteration's plan (compute/plan.ts), each episode seeded by
// its global index, acted by π_k (with a library skill in the prompt where the row acts with one).

import { rollout } from '../../compute/index.ts'
import { actingSkills, iterationPlan, libraryUse, shardTasks } from '../../compute/plan.ts'
import type { ShardInput } from '../../records/contracts.ts'
import { encodeJsonlGz } from '../../records/jsonl.ts'
import { ALGORITHMS } from '../../seed/algorithms.ts'
import type { RunConfig } from '../../seed/config.ts'
import { keys } from '../../store/keys.ts'
import { heartbeat, type PhaseDef, scopeOf } from '../phase-activity.ts'
import { numericStats } from '../phase-io.ts'

const needs = (c: RunConfig) => ({
  seed: c.seed,
  env: c.env,
  algorithm: c.algorithm,
  prompt: c.prompt,
  stage2: {
    tasksPerStep: c.stage2.tasksPerStep,
    groupSize: c.stage2.groupSize,
    maxEnvSteps: c.stage2.maxEnvSteps,
    temperature: c.stage2.temperature,
  },
})

export const rolloutPhase: PhaseDef<ShardInput, ReturnType<typeof needs>> = {
  describe: ({ shard }) => `rollout shard ${shard}`,
  needs,
  async plan({ run, iteration, shard, snapshot }, c, read) {
    const { shards } = await read.plan(run)
    const library = libraryUse(ALGORITHMS[c.algorithm]).acting ? await read.library(run, c.algorithm) : null
    return {
      scope: scopeOf(run, 'rollout', shard, iteration),
      inputs: { snapshot: snapshot.sha256, ...(library ? { library: library.sha256 } : {}) },
      async compute({ store, attempt }) {
        const { policy } = await read.policy((await read.snapshot(snapshot)).acting)
        const plan = iterationPlan(c, iteration)
        const groups = shardTasks(plan, shard, shards)
        const rolled = await rollout(policy, {
          env: c.env,
          tasks: groups.map((g) => plan.tasks[g] as (typeof plan.tasks)[number]),
          groups,
          groupSize: plan.groupSize,
          maxEnvSteps: c.stage2.maxEnvSteps,
          temperature: c.stage2.temperature,
          prompt: c.prompt,
          seed: plan.rolloutSeed,
          ...(library ? { actingSkills: actingSkills(plan, library.skills, groups) } : {}),
          // progress, and the place where a cancelled attempt stops
          onProgress: (finished, episodes) => heartbeat({ phase: 'rollout', step: finished, steps: episodes }),
        })
        const info = await store.put(
          keys.rollouts(run.runId, iteration, shard, attempt),
          encodeJsonlGz(rolled.trajectories),
        )
        const { truncation, ...stats } = rolled.stats
        return {
          outputs: { rollouts: info },
          stats: {
            ...numericStats(stats),
            success: rolled.stats.successRate,
            prompts: truncation.prompts,
            promptsTruncated: truncation.truncated,
            promptsBlockDropped: truncation.blockDropped,
            promptsFailed: truncation.failed,
          },
        }
      },
    }
  },
}
