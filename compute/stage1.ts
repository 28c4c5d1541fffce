// Stage 1 in process (docs/algorithm.md §2): the base policy rolls out Stage 1's train tasks, the annotator
// (`stage1.annotator`: the environment's oracle, or an external OpenAI-compatible endpoint) annotates every
// trajectory (the skill library), and SFT on the annotations mixed with acting data turns the policy into π_0. The pipeline's `annotate` and `stage1` activities and the benchmarks share these, with
// the same seeds, so a benchmark's Stage 1 is the pipeline's.
import { mixSeed } from '../envs/rng.ts'
import type { RunConfig, RunEnvSpec, Stage1Config } from '../seed/config.ts'
import { type AnalyzeStats, annotateWith, type SkillRecord } from './analyze.ts'
import { type Annotator, type AnnotatorStats, oracleAnnotator } from './annotator.ts'
import { type OpenAIAnnotatorDeps, openaiAnnotator } from './openai-annotator.ts'
import { CorePhaseError, type Policy } from './policy.ts'
import { type RolloutStats, type RolloutTrajectory, rollout, sampleTasks } from './rollout.ts'
import { type SftStats, sft } from './sft.ts'
import { actingPools, demonstrations } from './warmstart.ts'

export interface Stage1Annotation {
  trajectories: RolloutTrajectory[]
  skills: SkillRecord[]
  rollout: RolloutStats
  annotation: AnalyzeStats
  annotator: AnnotatorStats
}

/** What Stage 1's annotation needs from its caller: the external annotator's replies and environment, progress. */
export interface Stage1AnnotationDeps extends OpenAIAnnotatorDeps {
  onProgress?: (done: number, total: number) => void
}

/** The annotator a run's `stage1.annotator` names. */
export function annotatorFor(
  env: RunEnvSpec,
  settings: Stage1Config['annotator'],
  deps: OpenAIAnnotatorDeps = {},
): Annotator {
  switch (settings.kind) {
    case 'oracle':
      return oracleAnnotator(env)
    case 'openai':
      return openaiAnnotator(settings, deps)
  }
}

/** The root seed of Stage 1's rollouts and SFT. */
export function stage1Seed(config: RunConfig): number {
  return mixSeed(config.seed, 0x57a1)
}

/** Rolls out the base policy on Stage 1's train tasks and has the run's annotator annotate every trajectory. */
export async function annotateStage1(
  policy: Policy,
  config: RunConfig,
  deps: Stage1AnnotationDeps = {},
): Promise<Stage1Annotation> {
  const s1 = config.stage1
  const seed = stage1Seed(config)
  const rolled = await rollout(policy, {
    env: config.env,
    tasks: sampleTasks(config.env, 'train', s1.tasks, mixSeed(seed, 1)),
    groupSize: s1.samplesPerTask,
    maxEnvSteps: s1.maxEnvSteps,
    temperature: s1.temperature,
    prompt: config.prompt,
    seed: mixSeed(seed, 2),
  })
  const { onProgress, ...annotatorDeps } = deps
  const annotator = annotatorFor(config.env, s1.annotator, annotatorDeps)
  const annotated = await annotateWith(
    annotator,
    policy.codec,
    policy.model.config.maxPositions,
    {
      trajectories: rolled.trajectories,
      prompt: config.prompt,
      maxPromptTokens: config.stage2.analyzer.maxPromptTokens,
      maxAnswerTokens: config.stage2.analyzer.maxAnswerTokens,
      batchSize: 64,
    },
    onProgress,
  )
  return {
    trajectories: rolled.trajectories,
    skills: annotated.skills,
    rollout: rolled.stats,
    annotation: annotated.stats,
    annotator: annotated.annotator,
  }
}

/**
 * Trains `policy` in place into π_0 on the annotations, mixed with acting data: the annotated rollouts' steps, or
 * a replay of the warm-start's demonstrations (`stage1.actingData`).
 */
export async function trainStage1(
  policy: Policy,
  annotation: Pick<Stage1Annotation, 'skills' | 'trajectories'>,
  config: RunConfig,
  onStep?: (step: number, loss: number) => void,
): Promise<SftStats> {
  return sft(policy, {
    ...(onStep ? { onStep } : {}),
    skills: annotation.skills,
    trajectories: annotation.trajectories,
    settings: config.stage1,
    seed: mixSeed(stage1Seed(config), 3),
    ...(config.stage1.actingData === 'demonstrations' ? { replay: await replayPools(policy, config) } : {}),
  })
}

/** The warm-start's acting demonstrations, rebuilt from its settings and seed, as Stage 1's acting pools. */
async function replayPools(policy: Policy, config: RunConfig) {
  const ws = config.warmstart
  if (!ws) {
    throw new CorePhaseError(
      'stage1.actingData demonstrations replays the warm-start: the run has none (warmstart is null)',
    )
  }
  const demos = await demonstrations(config.env, ws, config.prompt, config.seed)
  return (await actingPools(policy, demos, config.env, config.prompt, ws, config.stage1.actingMix))('weighted')
}
