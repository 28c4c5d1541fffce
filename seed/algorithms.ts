// The algorithm switchboard (docs/algorithm.md §12, docs/design.md §9): SEED and the paper's baselines as rows
// of one closed table. Rows differ only in which phases run, where the skill comes from, what the teacher sees
// and which loss terms are on. Pure data; the pipeline reads it.
import type { LossTerms } from './losses.ts'

/** The phases of one Stage 2 iteration, in order. */
export const ITERATION_PHASES = ['snapshot', 'rollout', 'analyze', 'rescore', 'update'] as const
export type IterationPhase = (typeof ITERATION_PHASES)[number]

/** The log-probs `rescore` computes: old and reference always in RL, teacher only where OPD is on. */
export interface RescoreOutputs {
  old: boolean
  ref: boolean
  teacher: boolean
}

/**
 * Where an iteration's skill comes from:
 * - `self-analysis`: π_k analyzes its own trajectory (the analyze phase, current weights);
 * - `reference-analysis`: π_0 (the Stage 1 checkpoint) analyzes it (the analyze phase, fixed weights);
 * - `library`: the Stage 1 annotations, retrieved by environment and task family, else uniformly, seeded;
 * - `raw-hindsight`: the text of a successful trajectory of the same group (none: no OPD for that group);
 * - `oracle`: privileged, the environment's oracle skill of the expert's own solution of the trajectory's task (the
 *   skill the warm-start's skill-reading demonstrations carry; none where the expert fails: no OPD for that group).
 */
export type SkillSource = 'none' | 'self-analysis' | 'reference-analysis' | 'library' | 'raw-hindsight' | 'oracle'

/** What the OPD teacher (always π_k, scored in `rescore`) sees: the ordinary step prompt plus one block. */
export type TeacherContext = 'none' | 'prompt+skill' | 'prompt+raw-trajectory'

export interface AlgorithmRow {
  /** The row's start checkpoint, which is also its KL reference. */
  start: 'stage1-sft' | 'base'
  /** Whether Stage 2 iterations run at all (`skill-prompt` only evaluates). */
  rl: boolean
  /** Phases of one iteration, in order; empty without RL. */
  phases: readonly IterationPhase[]
  skillSource: SkillSource
  /** Which weights write the skill in `analyze`, where it runs. */
  analyzer: 'current' | 'stage1' | null
  /** Whether the acting prompt in rollouts carries a skill. */
  actingSkill: 'none' | 'library'
  teacherContext: TeacherContext
  rescore: RescoreOutputs | null
  /** Loss terms besides the PPO surrogate; null without RL. */
  loss: LossTerms | null
  /** Skill in the prompt at evaluation. */
  evaluationSkill: 'none' | 'library'
}

const RL_TERMS: LossTerms = { kl: true, entropy: true, opd: false }
const SEED_TERMS: LossTerms = { kl: true, entropy: true, opd: true }
const GRPO_PHASES = ['snapshot', 'rollout', 'rescore', 'update'] as const
const SEED_PHASES = ITERATION_PHASES

/** Every row of docs/algorithm.md §12. */
export const ALGORITHMS = {
  seed: {
    start: 'stage1-sft',
    rl: true,
    phases: SEED_PHASES,
    skillSource: 'self-analysis',
    analyzer: 'current',
    actingSkill: 'none',
    teacherContext: 'prompt+skill',
    rescore: { old: true, ref: true, teacher: true },
    loss: SEED_TERMS,
    evaluationSkill: 'none',
  },
  grpo: {
    start: 'base',
    rl: true,
    phases: GRPO_PHASES,
    skillSource: 'none',
    analyzer: null,
    actingSkill: 'none',
    teacherContext: 'none',
    rescore: { old: true, ref: true, teacher: false },
    loss: RL_TERMS,
    evaluationSkill: 'none',
  },
  'skill-prompt': {
    start: 'base',
    rl: false,
    phases: [],
    skillSource: 'library',
    analyzer: null,
    actingSkill: 'none',
    teacherContext: 'none',
    rescore: null,
    loss: null,
    evaluationSkill: 'library',
  },
  'skill-grpo': {
    start: 'base',
    rl: true,
    phases: GRPO_PHASES,
    skillSource: 'library',
    analyzer: null,
    actingSkill: 'library',
    teacherContext: 'none',
    rescore: { old: true, ref: true, teacher: false },
    loss: RL_TERMS,
    evaluationSkill: 'library',
  },
  'grpo-opsd': {
    start: 'base',
    rl: true,
    phases: GRPO_PHASES,
    skillSource: 'raw-hindsight',
    analyzer: null,
    actingSkill: 'none',
    teacherContext: 'prompt+raw-trajectory',
    rescore: { old: true, ref: true, teacher: true },
    loss: SEED_TERMS,
    evaluationSkill: 'none',
  },
  'seed-static': {
    start: 'stage1-sft',
    rl: true,
    phases: SEED_PHASES,
    skillSource: 'reference-analysis',
    analyzer: 'stage1',
    actingSkill: 'none',
    teacherContext: 'prompt+skill',
    rescore: { old: true, ref: true, teacher: true },
    loss: SEED_TERMS,
    evaluationSkill: 'none',
  },
  'seed-library': {
    start: 'stage1-sft',
    rl: true,
    phases: GRPO_PHASES,
    skillSource: 'library',
    analyzer: null,
    actingSkill: 'none',
    teacherContext: 'prompt+skill',
    rescore: { old: true, ref: true, teacher: true },
    loss: SEED_TERMS,
    evaluationSkill: 'none',
  },
  'seed-oracle': {
    start: 'stage1-sft',
    rl: true,
    phases: GRPO_PHASES,
    skillSource: 'oracle',
    analyzer: null,
    actingSkill: 'none',
    teacherContext: 'prompt+skill',
    rescore: { old: true, ref: true, teacher: true },
    loss: SEED_TERMS,
    evaluationSkill: 'none',
  },
  'seed-no-sft': {
    start: 'base',
    rl: true,
    phases: SEED_PHASES,
    skillSource: 'self-analysis',
    analyzer: 'current',
    actingSkill: 'none',
    teacherContext: 'prompt+skill',
    rescore: { old: true, ref: true, teacher: true },
    loss: SEED_TERMS,
    evaluationSkill: 'none',
  },
} as const satisfies Record<string, AlgorithmRow>

export type AlgorithmName = keyof typeof ALGORITHMS
export const ALGORITHM_NAMES = Object.keys(ALGORITHMS) as AlgorithmName[]

/** Whether Stage 1 (hindsight-skill SFT) runs before RL for this row. Library rows need its annotations too. */
export function needsStage1(row: AlgorithmRow): boolean {
  return row.start === 'stage1-sft'
}

/** Whether the row reads the Stage 1 annotation library (retrieval needs the annotations to exist). */
export function needsLibrary(row: AlgorithmRow): boolean {
  return row.skillSource === 'library' || row.actingSkill === 'library' || row.evaluationSkill === 'library'
}

/**
 * The invariants that tie a row's fields together; [] when the row is consistent. The table is checked
 * against them in tests, and a pipeline can check a row it is handed.
 */
export function rowProblems(row: AlgorithmRow): string[] {
  const problems: string[] = []
  const expect = (ok: boolean, message: string) => {
    if (!ok) problems.push(message)
  }
  const has = (phase: IterationPhase) => row.phases.includes(phase)
  const ordered = row.phases.every(
    (p, i) => i === 0 || ITERATION_PHASES.indexOf(row.phases[i - 1]!) < ITERATION_PHASES.indexOf(p),
  )
  expect(ordered, `phases ${row.phases.join(',')} are not in iteration order`)
  if (!row.rl) {
    expect(row.phases.length === 0, 'a row without RL runs no iteration phases')
    expect(row.loss === null && row.rescore === null, 'a row without RL has no loss terms and no rescore')
    expect(row.teacherContext === 'none', 'a row without RL has no teacher')
    return problems
  }
  for (const phase of ['snapshot', 'rollout', 'rescore', 'update'] as const) expect(has(phase), `RL needs ${phase}`)
  expect(row.loss !== null && row.rescore !== null, 'an RL row has loss terms and rescore outputs')
  const analyzes = row.skillSource === 'self-analysis' || row.skillSource === 'reference-analysis'
  expect(has('analyze') === analyzes, `analyze runs exactly when a model writes the skill (source ${row.skillSource})`)
  expect(
    row.analyzer ===
      (row.skillSource === 'self-analysis' ? 'current' : row.skillSource === 'reference-analysis' ? 'stage1' : null),
    `analyzer ${row.analyzer} does not match skill source ${row.skillSource}`,
  )
  if (row.analyzer === 'stage1') expect(row.start === 'stage1-sft', 'a Stage 1 analyzer needs Stage 1')
  const opd = row.loss?.opd ?? false
  expect(opd === (row.teacherContext !== 'none'), 'OPD is on exactly when there is a teacher context')
  expect((row.rescore?.teacher ?? false) === opd, 'teacher log-probs are rescored exactly when OPD is on')
  expect(row.rescore?.old === true && row.rescore?.ref === true, 'RL rescoring computes old and reference log-probs')
  if (row.teacherContext === 'prompt+skill') {
    expect(row.skillSource !== 'none' && row.skillSource !== 'raw-hindsight', 'a skill teacher needs a skill source')
  }
  if (row.teacherContext === 'prompt+raw-trajectory')
    expect(row.skillSource === 'raw-hindsight', 'raw teacher needs raw hindsight')
  if (row.actingSkill === 'library') expect(row.skillSource === 'library', 'a library acting skill needs the library')
  expect(row.loss?.kl === true && row.loss?.entropy === true, 'every RL row keeps the KL and entropy terms')
  return problems
}
