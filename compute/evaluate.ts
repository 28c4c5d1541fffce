// Evaluation (docs/algorithm.md §8): held-out tasks (a split and a seed range), one sample each, sampled at the
// evaluation temperature (0.4, not greedy), no skill in the prompt unless the row evaluates with one. The one
// evaluation behind the `evaluate` activity and `seedflow eval`.

import type { Split } from '../envs/types.ts'
import type { PromptSettings, RunEnvSpec } from '../seed/config.ts'
import { aggregateEvaluation, type EvaluationAggregates, type EvaluationTaskRecord } from './evaluation-stats.ts'
import type { Policy } from './policy.ts'
import { rollout } from './rollout.ts'

export interface EvaluateInput {
  env: RunEnvSpec
  split: Split
  /** Tasks are the seeds [seedStart, seedStart + tasks). */
  seedStart: number
  tasks: number
  temperature: number
  maxEnvSteps: number
  prompt: PromptSettings
  seed: number
  /** A skill per task (rows that evaluate with a library skill), else none. */
  skills?: readonly (string | null)[]
  maxBatch?: number
  /** Episodes finished so far, after every generate call. */
  onProgress?: (finished: number, episodes: number) => void
}

export interface EvaluationResult {
  tasks: number
  successRate: number
  /** Binomial standard error of the success rate. */
  standardError: number
  meanScore: number
  meanLength: number
  invalidRate: number
  /** Episodes the environment failed (a remote server's failures): counted as unsolved. */
  failedEpisodes: number
  perFamily: Record<string, { tasks: number; successRate: number }>
  /** Mean of the per-family success rates. */
  macroSuccessRate: number
  seconds: number
  /** One record per task, in seed order. */
  records: EvaluationTaskRecord[]
  /** The same numbers with 95% intervals (evaluation-stats.ts). */
  aggregates: EvaluationAggregates
}

/** The sampling seed of a run's evaluations, from the run's root seed (activity and CLI alike). */
export async function evaluate(policy: Policy, input: EvaluateInput): Promise<EvaluationResult> {
  const refs = Array.from({ length: input.tasks }, (_, i) => ({ split: input.split, seed: input.seedStart + i }))
  const r = await rollout(policy, {
    env: input.env,
    tasks: refs,
    groupSize: 1,
    maxEnvSteps: input.maxEnvSteps,
    temperature: input.temperature,
    prompt: input.prompt,
    seed: input.seed,
    ...(input.skills ? { actingSkills: input.skills } : {}),
    ...(input.maxBatch ? { maxBatch: input.maxBatch } : {}),
    ...(input.onProgress ? { onProgress: input.onProgress } : {}),
  })
  const records: EvaluationTaskRecord[] = r.trajectories.map((t) => ({
    seed: t.task.seed,
    family: t.trajectory.info.family,
    success: t.won,
    score: t.score,
    steps: t.steps.length,
    invalidSteps: t.steps.filter((s) => !s.valid).length,
  }))
  const aggregates = aggregateEvaluation(records)
  const p = aggregates.success.value
  return {
    tasks: records.length,
    successRate: p,
    standardError: Math.sqrt((p * (1 - p)) / Math.max(1, records.length)),
    meanScore: aggregates.score.value,
    meanLength: aggregates.length.value,
    invalidRate: aggregates.invalidRate.value,
    failedEpisodes: r.stats.failedEpisodes,
    perFamily: Object.fromEntries(
      Object.entries(aggregates.perFamily).map(([name, f]) => [name, { tasks: f.tasks, successRate: f.success.value }]),
    ),
    macroSuccessRate: aggregates.macroSuccess.value,
    seconds: r.stats.seconds,
    records,
    aggregates,
  }
}
