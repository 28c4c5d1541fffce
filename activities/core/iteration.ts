// One Stage 2 iteration of any algorithm row (docs/algorithm.md §3, §12), in process: rollout → analyze →
// rescore → update, each phase only where the row has it, the teacher's context chosen by the row. The Temporal
// workflow runs the same phases as activities; this composition is for scripts and tests.
import type { AdamWState } from '../../engine/index.ts'
import { trajectoryText } from '../../envs/index.ts'
import { mixSeed, mulberry32 } from '../../envs/rng.ts'
import type { RunConfig } from '../../seed/config.ts'
import { ALGORITHMS, episodeSkillBlock, hindsightBlock, type IterationPhase } from '../../seed/index.ts'
import { type AnalyzeStats, analyze } from './analyze.ts'
import { CorePhaseError, type Policy } from './policy.ts'
import { type RescoreStats, rescore } from './rescore.ts'
import { type RolloutStats, type RolloutTrajectory, rollout, sampleTasks } from './rollout.ts'
import { type UpdateMetrics, update } from './update.ts'

export interface IterationInput {
  config: RunConfig
  iteration: number
  optimizerState?: AdamWState
  /** Stage 1 skills, for rows that read the library (retrieved uniformly, seeded). */
  library?: readonly string[]
}

export interface IterationResult {
  phases: IterationPhase[]
  rollout: RolloutStats
  analyze: AnalyzeStats | null
  rescore: RescoreStats
  update: UpdateMetrics
  optimizerState: AdamWState
}

export interface IterationModels {
  /** π_k: acts, analyzes (self-analysis rows), teaches; trained in place into π_{k+1}. */
  policy: Policy
  /** The row's KL reference (its start checkpoint); null when it is π_k itself. */
  reference: Policy | null
  /** π_0 for rows whose analyzer is the Stage 1 checkpoint. */
  stage1?: Policy
}

/** Runs one iteration of the config's algorithm row. */
export async function runIteration(models: IterationModels, input: IterationInput): Promise<IterationResult> {
  const { config, iteration } = input
  const row = ALGORITHMS[config.algorithm]
  if (!row.rl || !row.loss) throw new CorePhaseError(`algorithm ${config.algorithm} has no RL iterations`)
  const s2 = config.stage2
  const phases: IterationPhase[] = ['snapshot']
  const seed = mixSeed(config.seed, 0x5eed, iteration)
  const tasks = sampleTasks(config.env, 'train', s2.tasksPerStep, mixSeed(seed, 1))
  const pickLibrary = (salt: number) => {
    const library = input.library ?? []
    if (library.length === 0) throw new CorePhaseError(`algorithm ${config.algorithm} needs the Stage 1 library`)
    const rng = mulberry32(mixSeed(seed, salt))
    return () => library[Math.floor(rng.next() * library.length)]!
  }
  const actingSkills = row.actingSkill === 'library' ? tasks.map(pickLibrary(2)) : undefined

  phases.push('rollout')
  const rolled = await rollout(models.policy, {
    env: config.env,
    tasks,
    groupSize: s2.groupSize,
    maxEnvSteps: s2.maxEnvSteps,
    temperature: s2.temperature,
    prompt: config.prompt,
    seed: mixSeed(seed, 3),
    ...(actingSkills ? { actingSkills } : {}),
  })

  let analyzeStats: AnalyzeStats | null = null
  let blocks: (string | null)[] | undefined
  const budget = {
    maxPromptTokens: config.prompt.maxPromptTokens,
    responseTokens: config.prompt.maxResponseTokens,
    contextLength: models.policy.model.config.maxPositions,
  }
  if (row.skillSource === 'self-analysis' || row.skillSource === 'reference-analysis') {
    phases.push('analyze')
    const analyzer = row.analyzer === 'stage1' ? models.stage1 : models.policy
    if (!analyzer) throw new CorePhaseError(`algorithm ${config.algorithm} analyzes with π_0, which was not given`)
    const analyzed = await analyze(analyzer, {
      trajectories: rolled.trajectories,
      prompt: config.prompt,
      maxPromptTokens: s2.analyzer.maxPromptTokens,
      maxAnswerTokens: s2.analyzer.maxAnswerTokens,
      batchSize: 64,
    })
    analyzeStats = analyzed.stats
    blocks = rolled.trajectories.map(() => null)
    for (const s of analyzed.skills) if (s.ok && s.skill) blocks[s.trajectory] = episodeSkillBlock(s.skill)
  } else if (row.teacherContext === 'prompt+skill' && row.skillSource === 'library') {
    const next = pickLibrary(4)
    blocks = rolled.trajectories.map(() => episodeSkillBlock(next()))
  } else if (row.teacherContext === 'prompt+raw-trajectory') {
    blocks = rawHindsightBlocks(rolled.trajectories)
  }

  phases.push('rescore')
  const scored = await rescore(models.policy, models.reference, {
    trajectories: rolled.trajectories,
    ...(row.rescore?.teacher && blocks ? { teacherBlocks: blocks } : {}),
    budget,
    temperature: s2.temperature,
    batchSize: 64,
  })

  phases.push('update')
  const updated = await update(models.policy, {
    samples: scored.samples,
    terms: row.loss,
    settings: s2,
    ...(input.optimizerState ? { optimizerState: input.optimizerState } : {}),
  })
  return {
    phases,
    rollout: rolled.stats,
    analyze: analyzeStats,
    rescore: scored.stats,
    update: updated.metrics,
    optimizerState: updated.optimizerState,
  }
}

/** `grpo-opsd`: each group's first successful trajectory, as text, teaches the whole group; none → no OPD. */
export function rawHindsightBlocks(trajectories: readonly RolloutTrajectory[]): (string | null)[] {
  const byGroup = new Map<number, string>()
  for (const t of trajectories) {
    if (t.won && !byGroup.has(t.group)) byGroup.set(t.group, hindsightBlock(trajectoryText(t.trajectory)))
  }
  return trajectories.map((t) => byGroup.get(t.group) ?? null)
}
