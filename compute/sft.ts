// Stage 1 (docs/algorithm.md §2): supervised fine-tuning on (analyzer prompt → skill JSON) pairs from the
// annotated rollouts of the base policy, mixed with acting data so that acting is not forgotten. The acting
// data is the base policy's own well-formed steps (step prompt → its sampled response): it keeps the acting
// distribution rather than improving it, so Stage 1 teaches analysis, not a better policy. The result is π_0,
// which is also SEED's KL reference.
import type { Stage1Config } from '../seed/config.ts'
import type { SkillRecord } from './analyze.ts'
import type { Policy } from './policy.ts'
import { promptContext } from './prompts.ts'
import type { RolloutTrajectory } from './rollout.ts'
import { type ExamplePool, type SupervisedExample, type SupervisedResult, supervisedTrain } from './supervised.ts'

export interface SftInput {
  /** Annotations (only parsed ones are trained on); their prompts are already fitted to the budget. */
  skills: readonly SkillRecord[]
  /** The annotated rollouts, whose steps are the acting data. */
  trajectories: readonly RolloutTrajectory[]
  settings: Pick<Stage1Config, 'steps' | 'batchSize' | 'lr' | 'warmupSteps' | 'actingMix'>
  seed: number
  /** Acting pools to replay instead of the trajectories' steps (their shares add up to `actingMix`). */
  replay?: readonly ExamplePool[]
  /** Told after each step with its loss (progress for heartbeats). */
  onStep?: (step: number, loss: number) => void
}

export interface SftStats extends Omit<SupervisedResult, 'losses' | 'optimizerState'> {
  skillPairs: number
  actingPairs: number
}

/**
 * The analyzer pairs of parsed annotations: context = the analyzer prompt as the record says the policy sees it
 * (less its `left`-truncated tokens), response = the answer JSON.
 */
export function skillPairs(policy: Policy, skills: readonly SkillRecord[]): SupervisedExample[] {
  return skills
    .filter((s) => s.ok)
    .map((s) => ({
      context: promptContext(policy.codec, s.prompt, s.promptTokensCut),
      response: policy.codec.responseIds(s.answer ?? s.raw),
    }))
}

/**
 * The trajectories' well-formed steps as acting pairs: malformed responses are not acting (training on them
 * would teach the policy to write them).
 */
function ownSteps(trajectories: readonly RolloutTrajectory[]): SupervisedExample[] {
  return trajectories.flatMap((t) =>
    t.steps.filter((s) => s.valid).map((s) => ({ context: s.promptIds, response: s.responseIds })),
  )
}

/** Trains `policy` in place into π_0. */
export async function sft(policy: Policy, input: SftInput): Promise<SftStats> {
  const skill = skillPairs(policy, input.skills)
  const actingPools = input.replay ?? [
    { name: 'acting', examples: ownSteps(input.trajectories), share: input.settings.actingMix },
  ]
  const {
    losses: _losses,
    optimizerState: _state,
    ...result
  } = await supervisedTrain(
    policy,
    [{ name: 'analyzer', examples: skill, share: 1 - input.settings.actingMix }, ...actingPools],
    {
      steps: input.settings.steps,
      batchSize: input.settings.batchSize,
      lr: input.settings.lr,
      warmupSteps: input.settings.warmupSteps,
      seed: input.seed,
      ...(input.onStep ? { onStep: input.onStep } : {}),
    },
  )
  return { ...result, skillPairs: skill.length, actingPairs: actingPools.reduce((n, p) => n + p.examples.length, 0) }
}
