// Evaluation (reference section 8): held-out tasks (a split and a seed range), one sample each, sampled at the
// evaluation temperature (0.4, not greedy), no skill in the prompt unless the row evaluates with one.
import type { Split } from '../../envs/types.ts'
import type { PromptSettings, RunEnvName } from '../../seed/config.ts'
import type { Policy } from './policy.ts'
import { rollout } from './rollout.ts'

export interface EvaluateInput {
  env: RunEnvName
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
}

export interface EvaluationResult {
  tasks: number
  successRate: number
  /** Binomial standard error of the success rate. */
  standardError: number
  meanScore: number
  meanLength: number
  invalidRate: number
  perFamily: Record<string, { tasks: number; successRate: number }>
  /** Mean of the per-family success rates. */
  macroSuccessRate: number
  seconds: number
}

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
  })
  const families = new Map<string, { tasks: number; won: number }>()
  for (const t of r.trajectories) {
    const f = families.get(t.trajectory.info.family) ?? { tasks: 0, won: 0 }
    f.tasks++
    if (t.won) f.won++
    families.set(t.trajectory.info.family, f)
  }
  const perFamily = Object.fromEntries(
    [...families].map(([name, f]) => [name, { tasks: f.tasks, successRate: f.won / f.tasks }]),
  )
  const rates = Object.values(perFamily).map((f) => f.successRate)
  const p = r.stats.successRate
  return {
    tasks: r.stats.episodes,
    successRate: p,
    standardError: Math.sqrt((p * (1 - p)) / Math.max(1, r.stats.episodes)),
    meanScore: r.stats.meanScore,
    meanLength: r.stats.meanLength,
    invalidRate: r.stats.invalidRate,
    perFamily,
    macroSuccessRate: rates.length === 0 ? 0 : rates.reduce((a, b) => a + b, 0) / rates.length,
    seconds: r.stats.seconds,
  }
}
