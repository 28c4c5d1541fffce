import type { Rng } from './rng.ts'

// The environment interface of docs/design.md §8. Environments deal in strings: a model response goes in,
// an observation comes out. Nothing here knows about tokens, tensors or Temporal.

export const SPLITS = ['train', 'validation', 'test-seen', 'test-unseen'] as const
export type Split = (typeof SPLITS)[number]

/** Identifies one task: the same (split, seed) always gives the same task. */
export interface TaskRef {
  split: Split
  seed: number
}

/** What a parser returns. Unusable output is data, not an exception (docs/design.md §11.2). */
export type ParseResult = { ok: true; action: string } | { ok: false; reason: string }

export interface EpisodeInfo {
  won: boolean
  /** Task score in [0, 1] where the original reports one (shop), else 1 when won and 0 otherwise. */
  score: number
  /** Task family, for per-family success (household: pick_and_place, …). */
  family: string
}

export interface StepRecord {
  /** The raw observation the action was taken from (verl-agent's anchor observation, not the whole prompt). */
  observation: string
  /** The model's full output. */
  response: string
  /** The parsed action, or null when the output was unusable. */
  action: string | null
  valid: boolean
  /** Why the output was unusable (only when valid is false). */
  reason?: string
  /** The environment's reward for this step; the invalid-action penalty is the caller's to apply. */
  reward: number
}

export interface Trajectory {
  env: string
  task: TaskRef
  taskText: string
  steps: StepRecord[]
  /** The observation after the last step (not part of the analyzer's view of the episode). */
  finalObservation: string
  info: EpisodeInfo
  /** Sum of environment rewards. */
  totalReward: number
}

export interface StepResult {
  observation: string
  reward: number
  done: boolean
  valid: boolean
  action: string | null
  reason?: string
  info: EpisodeInfo
}

export interface PromptOptions {
  /** Shorter instructions and a history window of at most one step, for small context windows. */
  compact?: boolean
  /**
   * The prompt without what the episode shows (no observation, no history): only the instruction and the step
   * line. For the warm-start's skill-only pairs (`warmstart.skillBlind`), where the skill alone says the move.
   */
  blind?: boolean
}

/** One running episode. `step` takes the model's full output; it never throws on unusable output. */
export interface Episode {
  readonly env: string
  readonly task: TaskRef
  readonly taskText: string
  readonly observation: string
  readonly done: boolean
  readonly stepCount: number
  readonly info: EpisodeInfo
  /** The admissible actions where the original shows them, else null. */
  admissible(): string[] | null
  /** The verl-agent style user message for the current step. */
  prompt(options?: PromptOptions): string
  step(response: string): StepResult
  /** Restarts the same task from its first observation. */
  reset(): void
  /** A uniformly random valid action (the admissible list where there is one), for baselines and tests. */
  randomAction(rng: Rng): string
  /** The expert's next action (the inner action text, not a formatted response). */
  expertAction(): string
  /** The expert's reason for that action in a few words (its current sub-goal), or '' for an env without one. */
  expertThought(): string
  trajectory(): Trajectory
}

/** The analyzer's JSON (docs/algorithm.md §4). */
export interface AnalyzerOutput {
  episode_summary: string
  episode_skill: string
}

export interface OracleAnalysis {
  output: AnalyzerOutput
  /** The concrete names (objects, receptacles, products, cards, …) the skill mentions; each is in the trajectory. */
  entities: string[]
  /**
   * The skill's instruction without this episode's particulars (a won sokoban episode's: the workflow sentence,
   * without its list of moves), where the environment can say it: the reduced skill of the premise check
   * (compute/skill-gap.ts), which tells copying the moves apart from following an instruction.
   */
  rule?: string
}

export interface Env {
  readonly name: string
  readonly maxSteps: number
  readonly historyLength: number
  task(split: Split, seed: number): TaskRef
  reset(task: TaskRef): Episode
  /** Parses a model response into an action, or says why it cannot. */
  parse(response: string): ParseResult
  /** Wraps an action in this environment's response format (for demonstrations and scripted policies). */
  formatResponse(action: string, thought?: string): string
  /** Writes one hindsight skill for a finished trajectory from facts visible in its own text. */
  oracle(trajectory: Trajectory): OracleAnalysis
}
