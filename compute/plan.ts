// The algorithm's decisions for one Stage 2 iteration, as pure functions of the configuration, the iteration and
// the algorithm row (docs/algorithm.md §12): the sampling seeds, which tasks, which skill each acting prompt and
// each teacher prompt carries, which loss terms. The phase activities, the benchmark and the tests all ask here,
// so an iteration is decided in one place. Every stream is keyed by a global index (task, episode, trajectory),
// never by shard, so a run's trajectories do not depend on how a worker sized its shards.
import { trajectoryText } from '../envs/index.ts'
import { mixSeed, mulberry32 } from '../envs/rng.ts'
import type { TaskRef } from '../envs/types.ts'
import type { AlgorithmName, AlgorithmRow } from '../seed/algorithms.ts'
import { ALGORITHMS } from '../seed/algorithms.ts'
import type { RunConfig, RunEnvSpec } from '../seed/config.ts'
import type { LossTerms } from '../seed/losses.ts'
import { episodeSkillBlock, hindsightBlock } from '../seed/skill-context.ts'
import { environmentOf } from './environment.ts'
import { CorePhaseError } from './policy.ts'
import { type RolloutTrajectory, sampleTasks } from './rollout.ts'

/** What of the configuration the plan reads. */
export interface PlanConfig {
  seed: number
  env: RunEnvSpec
  algorithm: AlgorithmName
  stage2: { tasksPerStep: number; groupSize: number }
}

export interface IterationPlan {
  env: RunEnvSpec
  iteration: number
  /** The iteration's root seed; every stream below derives from it. */
  seed: number
  /** The B train tasks of the iteration; a task's index is its group number. */
  tasks: readonly TaskRef[]
  groupSize: number
  /** Seeds episode e's sampling stream as mixSeed(rolloutSeed, e), e = group · N + sample. */
  rolloutSeed: number
}

/** The root seed of iteration k; the same for every row, so rows of one training seed see the same tasks. */
export function iterationSeed(rootSeed: number, iteration: number): number {
  return mixSeed(rootSeed, 0x5eed, iteration)
}

export function iterationPlan(config: PlanConfig, iteration: number): IterationPlan {
  const seed = iterationSeed(config.seed, iteration)
  return {
    env: config.env,
    iteration,
    seed,
    tasks: sampleTasks(config.env, 'train', config.stage2.tasksPerStep, mixSeed(seed, 1)),
    groupSize: config.stage2.groupSize,
    rolloutSeed: mixSeed(seed, 3),
  }
}

/** The global task (group) indices of one rollout shard: every `shards`-th from `shard`, groups kept whole. */
export function shardTasks(plan: IterationPlan, shard: number, shards: number): number[] {
  return plan.tasks.map((_, index) => index).filter((index) => index % shards === shard)
}

/** The global index of an episode: its group's episodes are numbered consecutively. */
export function episodeIndex(group: number, sample: number, groupSize: number): number {
  return group * groupSize + sample
}

/** A uniform, seeded pick from the library for one global index (task or trajectory) of one stream. */
function libraryPick(library: readonly string[], seed: number, stream: number, index: number): string {
  if (library.length === 0) throw new CorePhaseError('the Stage 1 skill library is empty')
  const rng = mulberry32(mixSeed(seed, stream, index))
  return library[Math.floor(rng.next() * library.length)] as string
}

/**
 * The oracle skill of the expert's solution of `task`: the episode takes the responses of `prefix` (none: the
 * expert plays from the start), then the expert plays it to the end, and the environment's oracle analyzes that
 * trajectory; null when the episode is not won.
 */
export async function expertSkill(
  env: RunEnvSpec,
  task: TaskRef,
  prefix: readonly string[] = [],
): Promise<string | null> {
  const e = environmentOf(env)
  const episode = await e.open(task)
  try {
    for (const response of prefix) {
      if (episode.done) throw new CorePhaseError(`${e.name}: the episode ended before its recorded response`)
      await episode.step(response)
    }
    while (!episode.done) {
      const move = await episode.expert()
      if (!move) throw new CorePhaseError(`${e.name} has no expert: the oracle teacher plays the expert's solution`)
      await episode.step(e.formatResponse(move.action))
    }
    const trajectory = await episode.trajectory()
    return trajectory.info.won ? (await e.oracle(trajectory)).output.episode_skill : null
  } finally {
    await episode.close()
  }
}

/**
 * The oracle skill at each step of a trajectory (`stage2.oraclePlan: step`): the student's responses before the
 * step, then the expert's solution from the step's own state, analyzed as one episode. The plan holds where the
 * student is, in the form the warm-start's detours teach (a won episode's moves from the first state). Null at
 * a step from which the expert does not win.
 */
export async function stepSkills(
  env: RunEnvSpec,
  task: TaskRef,
  responses: readonly string[],
): Promise<(string | null)[]> {
  const skills: (string | null)[] = []
  for (let step = 0; step < responses.length; step++)
    skills.push(await expertSkill(env, task, responses.slice(0, step)))
  return skills
}

/** One trajectory's teacher block: one for all its steps, one per step (null: no teacher at that step), or none. */
export type TeacherBlock = string | readonly (string | null)[] | null

/** The block a trajectory's teacher reads at `step`. */
export const blockAt = (block: TeacherBlock | undefined, step: number): string | null =>
  typeof block === 'string' || block == null ? (block ?? null) : (block[step] ?? null)

/** Where the OPD teacher's block comes from (null: the row has no teacher). */
export type TeacherSource = 'analysis' | 'library' | 'raw-trajectory' | 'oracle' | null

export function teacherSource(row: AlgorithmRow): TeacherSource {
  if (!row.rescore?.teacher) return null
  switch (row.skillSource) {
    case 'self-analysis':
    case 'reference-analysis':
      return 'analysis'
    case 'library':
      return 'library'
    case 'raw-hindsight':
      return 'raw-trajectory'
    case 'oracle':
      return 'oracle'
    default:
      return null
  }
}

/** What of the Stage 1 library an iteration of the row reads. */
export function libraryUse(row: AlgorithmRow): { acting: boolean; teacher: boolean } {
  return { acting: row.actingSkill === 'library', teacher: teacherSource(row) === 'library' }
}

/** The acting skill of each of `tasks` (global task indices) for rows whose acting prompt carries one. */
export function actingSkills(plan: IterationPlan, library: readonly string[], tasks: readonly number[]): string[] {
  return tasks.map((task) => libraryPick(library, plan.seed, 2, task))
}

/**
 * The teacher's block for every trajectory of the iteration (indexed by global trajectory id), or undefined
 * when the row has no teacher: the skill the analyzer wrote for that trajectory (null where it wrote none), a
 * library skill, the text of the group's first successful trajectory (`grpo-opsd`; none → no OPD), or the oracle
 * skill of the expert's solution of the group's task (`seed-oracle`; the expert fails → no OPD).
 */
export async function teacherBlocks(
  plan: IterationPlan,
  row: AlgorithmRow,
  trajectories: readonly RolloutTrajectory[],
  context: {
    analysis?: ReadonlyMap<number, string>
    library?: readonly string[]
    /** Where the oracle plans from (`stage2.oraclePlan`; default `start`). */
    oraclePlan?: 'start' | 'step'
  },
): Promise<TeacherBlock[] | undefined> {
  const source = teacherSource(row)
  if (source === null) return undefined
  const blocks: TeacherBlock[] = []
  if (source === 'raw-trajectory') {
    const byGroup = new Map<number, string>()
    for (const t of trajectories) {
      if (t.won && !byGroup.has(t.group)) byGroup.set(t.group, hindsightBlock(trajectoryText(t.trajectory)))
    }
    for (const t of trajectories) blocks[t.id] = byGroup.get(t.group) ?? null
    return blocks
  }
  if (source === 'oracle' && context.oraclePlan === 'step') {
    for (const t of trajectories) {
      const skills = await stepSkills(
        plan.env,
        t.task,
        t.steps.map((s) => s.responseText),
      )
      blocks[t.id] = skills.map((skill) => (skill === null ? null : episodeSkillBlock(skill)))
    }
    return blocks
  }
  if (source === 'oracle') {
    const byGroup = new Map<number, string | null>()
    for (const t of trajectories) {
      if (!byGroup.has(t.group)) {
        const task = plan.tasks[t.group]
        if (!task) throw new CorePhaseError(`trajectory ${t.id}: group ${t.group} is not a task of the plan`)
        const skill = await expertSkill(plan.env, task)
        byGroup.set(t.group, skill === null ? null : episodeSkillBlock(skill))
      }
      blocks[t.id] = byGroup.get(t.group) ?? null
    }
    return blocks
  }
  for (const t of trajectories) {
    if (source === 'library') {
      if (!context.library) throw new CorePhaseError('the row teaches with library skills; no library was given')
      blocks[t.id] = episodeSkillBlock(libraryPick(context.library, plan.seed, 4, t.id))
    } else {
      const skill = context.analysis?.get(t.id)
      blocks[t.id] = skill ? episodeSkillBlock(skill) : null
    }
  }
  return blocks
}

/** Whether the rescore scores the control prompt: for the `control` gate, or as a diagnostic (`stage2.controlGap`). */
export const scoresControl = (s: { opdGate: RunConfig['stage2']['opdGate']; controlGap?: boolean | undefined }) =>
  s.opdGate === 'control' || s.controlGap === true

/**
 * The control block of every taught trajectory (indexed by trajectory id) for the `control` OPD gate: the taught
 * trajectories in id order, each takes the teacher block of the one half the list ahead (cyclically), stepping
 * on past trajectories of its own group, so a control skill is always another task's. Of per-step blocks it
 * takes the first step's (the other task's plan from its first state). Null where there is no other group's
 * block (and for trajectories without a teacher block).
 */
export function controlBlocks(
  blocks: readonly TeacherBlock[],
  trajectories: readonly RolloutTrajectory[],
): (string | null)[] {
  const taught = trajectories.filter((t) => blockAt(blocks[t.id], 0)).sort((a, b) => a.id - b.id)
  const out = new Array<string | null>(Math.max(0, ...trajectories.map((t) => t.id + 1))).fill(null)
  const half = Math.floor(taught.length / 2)
  taught.forEach((t, i) => {
    for (let k = 0; k < taught.length; k++) {
      const other = taught[(i + Math.max(half, 1) + k) % taught.length]!
      if (other.group !== t.group) {
        out[t.id] = blockAt(blocks[other.id], 0)
        return
      }
    }
  })
  return out
}

/** The loss terms of the row's update; a row without RL has none. */
export function lossTerms(algorithm: AlgorithmName): LossTerms {
  const terms = ALGORITHMS[algorithm].loss
  if (!terms) throw new CorePhaseError(`algorithm ${algorithm} has no RL update`)
  return terms
}

/** The root seed of an evaluation's sampling streams (the same for every checkpoint of a run). */
export function evaluationSeed(rootSeed: number): number {
  return mixSeed(rootSeed, 0xe7a1)
}

/** A library skill per evaluation task, drawn uniformly with a stream seeded from the evaluation seed. */
export function evaluationSkills(library: readonly string[], tasks: number, seed: number): string[] {
  const rng = mulberry32(mixSeed(seed, 1))
  return Array.from({ length: tasks }, () => library[Math.floor(rng.next() * library.length)] as string)
}
