// Stage-1 examples mixed into a Stage 2 update (`stage2.stage1Mix`, a deviation from the paper,
// docs/algorithm.md §3). In the paper nothing in Stage 2 trains the analyzer or the skill-reading: on the tiny
// model both erode during RL (parse rates 0.7 → 0.06–0.25 on household). After the RL pass, a few supervised steps
// on analyzer answers (the run's Stage 1 annotations) and on skill-reading demonstrations (expert solutions of fresh
// train tasks whose prompt carries their oracle skill, made as the warm-start makes its own) keep both alive.
import { mixSeed } from '../envs/rng.ts'
import type { PromptSettings, RunEnvSpec, Stage2Config, WarmstartConfig } from '../seed/config.ts'
import type { SkillRecord } from './analyze.ts'
import { CorePhaseError, type Policy } from './policy.ts'
import { skillPairs } from './sft.ts'
import { type ExamplePool, type PoolLoss, supervisedTrain } from './supervised.ts'
import { actingPools, demonstrations } from './warmstart.ts'

export type Stage1MixSettings = NonNullable<Stage2Config['stage1Mix']>

export interface Stage1MixInput {
  env: RunEnvSpec
  prompt: PromptSettings
  settings: Stage1MixSettings
  /** The run's Stage 1 annotations with a parsed skill (analyzer prompt → answer). */
  annotations: readonly SkillRecord[]
  /** The warm-start's settings, which the skill-reading demonstrations follow; null with `analyzerShare` 1. */
  warmstart: WarmstartConfig | null
  /** Seeds the demonstrations' tasks and the batches; vary it per iteration. */
  seed: number
  /** Called after each supervised step with its number and loss. */
  onStep?: (step: number, loss: number) => void
}

export interface Stage1MixStats {
  steps: number
  /** Mean loss over the first and the last 10% of the steps. */
  firstLoss: number
  lastLoss: number
  /** The same per pool (the analyzer's answers, the skill-reading demonstrations). */
  pools: PoolLoss[]
  analyzerPairs: number
  skillDemos: number
  seconds: number
}

/**
 * Expert solutions per demonstration step: enough demonstration episodes that the skill-reading steps rarely draw
 * the same example twice (an episode gives one example per step; the shortest tasks take ~3).
 */
const DEMO_STEPS_PER_EPISODE = 3

/** Trains `policy` in place on the mixed-in Stage-1 examples. */
export async function stage1Mix(policy: Policy, input: Stage1MixInput): Promise<Stage1MixStats> {
  const { settings } = input
  const analyzer = skillPairs(policy, input.annotations)
  if (settings.analyzerShare > 0 && analyzer.length === 0)
    throw new CorePhaseError('stage2.stage1Mix: the Stage 1 annotations hold no parsed skill to mix in')
  const pools: ExamplePool[] = [{ name: 'analyzer', examples: analyzer, share: settings.analyzerShare }]
  let skillDemos = 0
  const demoShare = 1 - settings.analyzerShare
  if (demoShare > 0) {
    const ws = input.warmstart
    if (!ws) throw new CorePhaseError('stage2.stage1Mix: skill-reading demonstrations need the warm-start settings')
    const episodes = Math.ceil((settings.steps * demoShare * settings.batchSize) / DEMO_STEPS_PER_EPISODE)
    // every episode a clean expert solution with its oracle skill in the prompt (skillDemoShare 1)
    const demos = await demonstrations(
      input.env,
      // the expert's, whatever the warm-start cloned (a file's demonstrations have no skills)
      { ...ws, demoTasks: episodes, skillDemoShare: 1, demonstrationsFile: undefined },
      input.prompt,
      mixSeed(input.seed, 1),
    )
    const skill = (
      await actingPools(policy, { plain: [], skilled: demos.skilled }, input.env, input.prompt, ws, demoShare)
    )('weighted')
    skillDemos = skill.reduce((n, p) => n + p.examples.length, 0)
    pools.push(...skill)
  }
  const trained = await supervisedTrain(policy, pools, {
    steps: settings.steps,
    batchSize: settings.batchSize,
    lr: settings.lr,
    // a fresh AdamW each update: its first steps move every weight by about lr whatever the gradient, which at
    // lr 3e-4 without warm-up broke the tiny model's analyzer into repetition loops (parse rate 0 in every other
    // iteration, docs/benchmarks.md §3.4); half the steps warm up
    warmupSteps: Math.ceil(settings.steps / 2),
    seed: mixSeed(input.seed, 2),
    ...(input.onStep ? { onStep: input.onStep } : {}),
  })
  return {
    steps: trained.steps,
    firstLoss: trained.firstLoss,
    lastLoss: trained.lastLoss,
    pools: trained.pools,
    analyzerPairs: analyzer.length,
    skillDemos,
    seconds: trained.seconds,
  }
}
