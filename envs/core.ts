// Shared machinery: an environment is a small spec (dynamics, parser, renderer, expert, oracle); this file turns
// it into the Episode interface, keeps the step count, the step cap and the history window, and never branches
// on a concrete environment.

import { pick, type Rng } from './rng.ts'
import type {
  Env,
  Episode,
  EpisodeInfo,
  OracleAnalysis,
  ParseResult,
  PromptOptions,
  Split,
  StepRecord,
  StepResult,
  TaskRef,
  Trajectory,
} from './types.ts'
import { SPLITS } from './types.ts'

/** verl-agent seed ranges: train [0, 2^16), the rest above; test-unseen is test-seen. */
const TRAIN_SEEDS = 2 ** 16
const VALIDATION_SEEDS = 2 ** 31 - TRAIN_SEEDS

export function verlAgentSeed(split: Split, seed: number): number {
  if (split === 'train') return seed % TRAIN_SEEDS
  if (split === 'validation') return TRAIN_SEEDS + (seed % VALIDATION_SEEDS)
  return 2 ** 31 + (seed % 2 ** 31)
}

/** verl-agent's invalid-action penalty, applied by the caller on the step's last response token. */
export const INVALID_ACTION_PENALTY = 0.1

export class InvalidTaskError extends Error {
  override name = 'InvalidTaskError'
}

export interface Transition {
  observation: string
  reward: number
  done: boolean
  won: boolean
  /** Defaults to 1 when won, else 0. */
  score?: number
}

export interface HistoryEntry {
  observation: string
  action: string
}

/** What a renderer needs for one step's prompt. */
export interface PromptView<S> {
  taskText: string
  state: S
  observation: string
  /** The last `historyLength` (observation, action) pairs, oldest first. */
  history: HistoryEntry[]
  /** Steps taken so far in the episode. */
  stepCount: number
  admissible: string[] | null
  compact: boolean
}

export interface EnvSpec<T, S> {
  name: string
  maxSteps: number
  historyLength: number
  /** Builds the task for a split and seed; pure and deterministic. */
  generate(ref: TaskRef): T
  taskText(task: T): string
  family(task: T): string
  initial(task: T): { state: S; observation: string }
  /** Applies a parsed action; may mutate `state`. */
  transition(task: T, state: S, action: string): Transition
  /** What happens when the output was unusable (the original's no-op for this environment). */
  invalid(task: T, state: S, reason: string): Transition
  admissible(task: T, state: S): string[] | null
  parse(response: string): ParseResult
  formatResponse(action: string, thought?: string): string
  render(view: PromptView<S>): string
  expert(task: T, state: S): string
  /** The expert's sub-goal in a few words, for demonstrations that think before they act (`<think>…</think>`). */
  expertThought?(task: T, state: S): string
  /** A random valid action where there is no admissible list (or it is not the whole action space). */
  randomAction?(task: T, state: S, rng: Rng): string
  oracle(trajectory: Trajectory): OracleAnalysis
}

function checkRef(name: string, ref: TaskRef): void {
  if (!SPLITS.includes(ref.split)) throw new InvalidTaskError(`${name}: unknown split ${JSON.stringify(ref.split)}`)
  if (!Number.isSafeInteger(ref.seed) || ref.seed < 0) {
    throw new InvalidTaskError(`${name}: seed must be a non-negative safe integer, got ${ref.seed}`)
  }
}

class SpecEpisode<T, S> implements Episode {
  readonly taskText: string
  private state!: S
  private obs = ''
  private steps: StepRecord[] = []
  private history: HistoryEntry[] = []
  private finished = false
  private won = false
  private score = 0
  private total = 0

  constructor(
    private readonly spec: EnvSpec<T, S>,
    readonly task: TaskRef,
    private readonly data: T,
  ) {
    this.taskText = spec.taskText(data)
    this.reset()
  }

  get env(): string {
    return this.spec.name
  }
  get observation(): string {
    return this.obs
  }
  get done(): boolean {
    return this.finished
  }
  get stepCount(): number {
    return this.steps.length
  }
  get info(): EpisodeInfo {
    return { won: this.won, score: this.score, family: this.spec.family(this.data) }
  }

  reset(): void {
    const start = this.spec.initial(this.data)
    this.state = start.state
    this.obs = start.observation
    this.steps = []
    this.history = []
    this.finished = false
    this.won = false
    this.score = 0
    this.total = 0
  }

  admissible(): string[] | null {
    return this.spec.admissible(this.data, this.state)
  }

  prompt(options: PromptOptions = {}): string {
    const compact = options.compact ?? false
    const window = historyWindow(options, this.spec.historyLength)
    return this.spec.render({
      taskText: this.taskText,
      state: this.state,
      observation: options.blind ? '' : this.obs,
      history: window > 0 ? this.history.slice(-window) : [],
      stepCount: this.steps.length,
      admissible: this.admissible(),
      compact,
    })
  }

  step(response: string): StepResult {
    if (this.finished) {
      throw new InvalidTaskError(`${this.spec.name}: step after the episode ended (${this.steps.length} steps taken)`)
    }
    const parsed = this.spec.parse(response)
    const before = this.obs
    const t = parsed.ok
      ? this.spec.transition(this.data, this.state, parsed.action)
      : this.spec.invalid(this.data, this.state, parsed.reason)
    const record: StepRecord = {
      observation: before,
      response,
      action: parsed.ok ? parsed.action : null,
      valid: parsed.ok,
      reward: t.reward,
    }
    if (!parsed.ok) record.reason = parsed.reason
    this.steps.push(record)
    this.history.push({ observation: before, action: parsed.ok ? parsed.action : response.slice(-30) })
    if (this.history.length > this.spec.historyLength) this.history.shift()
    this.obs = t.observation
    this.total += t.reward
    if (t.won) this.won = true
    this.score = t.score ?? (this.won ? 1 : this.score)
    this.finished = t.done || this.steps.length >= this.spec.maxSteps
    const result: StepResult = {
      observation: t.observation,
      reward: t.reward,
      done: this.finished,
      valid: parsed.ok,
      action: record.action,
      info: this.info,
    }
    if (!parsed.ok) result.reason = parsed.reason
    return result
  }

  randomAction(rng: Rng): string {
    if (this.spec.randomAction) return this.spec.randomAction(this.data, this.state, rng)
    const options = this.admissible()
    if (!options || options.length === 0) {
      throw new InvalidTaskError(`${this.spec.name}: no admissible actions and no random action rule`)
    }
    return pick(rng, options)
  }

  expertAction(): string {
    return this.spec.expert(this.data, this.state)
  }

  expertThought(): string {
    return this.spec.expertThought?.(this.data, this.state) ?? ''
  }

  trajectory(): Trajectory {
    return {
      env: this.spec.name,
      task: { ...this.task },
      taskText: this.taskText,
      steps: this.steps.map((s) => ({ ...s })),
      finalObservation: this.obs,
      info: this.info,
      totalReward: this.total,
    }
  }
}

/** Turns a spec into an environment. */
export function defineEnv<T, S>(
  spec: EnvSpec<T, S>,
): Env & { readonly spec: EnvSpec<T, S>; generate(ref: TaskRef): T } {
  return {
    spec,
    name: spec.name,
    maxSteps: spec.maxSteps,
    historyLength: spec.historyLength,
    task(split: Split, seed: number): TaskRef {
      const ref = { split, seed }
      checkRef(spec.name, ref)
      return ref
    },
    generate(ref: TaskRef): T {
      checkRef(spec.name, ref)
      return spec.generate(ref)
    },
    reset(ref: TaskRef): Episode {
      checkRef(spec.name, ref)
      return new SpecEpisode(spec, { ...ref }, spec.generate(ref))
    },
    parse: (response) => spec.parse(response),
    formatResponse: (action, thought) => spec.formatResponse(action, thought),
    oracle: (trajectory) => spec.oracle(trajectory),
  }
}

/**
 * The trajectory as the analyzer sees it (docs/algorithm.md §4): the task, then per step the observation, the full
 * response and the validity flag. The oracle may only name what appears in this text.
 */
export function trajectoryText(t: Trajectory): string {
  const lines = [`Task: ${t.taskText}`, `episode_success: ${t.info.won ? 'success' : 'failure'}`]
  t.steps.forEach((s, k) => {
    lines.push(`Step ${k}`, `Observation: ${s.observation}`, `Response: ${s.response}`, `Action valid: ${s.valid}`)
  })
  return lines.join('\n')
}

// ---- parsing helpers (shared by the <think>/<action> environments) ----

const CJK = /[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]/

/** The text between the first `open` and the next `close`, or null. Linear time, no regex backtracking. */
export function between(text: string, open: string, close: string): string | null {
  const i = text.indexOf(open)
  if (i < 0) return null
  const j = text.indexOf(close, i + open.length)
  if (j < 0) return null
  return text.slice(i + open.length, j)
}

/** ALFWorld/WebShop projection: lowercase, needs <think>…</think> and <action>…</action>, no CJK. */
export function parseThinkAction(response: string, maxActionChars = 300): ParseResult {
  if (typeof response !== 'string') return { ok: false, reason: 'response is not a string' }
  const text = response.toLowerCase()
  if (CJK.test(text)) return { ok: false, reason: 'response contains CJK characters' }
  if (between(text, '<think>', '</think>') === null) return { ok: false, reason: 'missing <think>...</think>' }
  const inner = between(text, '<action>', '</action>')
  if (inner === null) return { ok: false, reason: 'missing <action>...</action>' }
  const action = inner.trim().replace(/\s+/g, ' ')
  if (action.length === 0) return { ok: false, reason: 'empty <action>' }
  if (action.length > maxActionChars) return { ok: false, reason: `action longer than ${maxActionChars} characters` }
  return { ok: true, action }
}

export function formatThinkAction(action: string, thought = ''): string {
  return `<think>${thought}</think><action>${action}</action>`
}

// ---- prompt helpers ----

/**
 * How many past (observation, action) pairs a step prompt shows: the environment's history length, at most one when
 * compact, none when blind (the prompt shows nothing of the episode).
 */
export function historyWindow(options: PromptOptions, historyLength: number): number {
  if (options.blind) return 0
  return options.compact ? Math.min(1, historyLength) : historyLength
}

/** verl-agent's history lines: `[Observation k: '…', Action k: '…']`, k counted from the episode start. */
export function renderHistory(history: HistoryEntry[], stepCount: number): string {
  const first = stepCount - history.length + 1
  return history
    .map((h, i) => `[Observation ${first + i}: '${h.observation}', Action ${first + i}: '${h.action}']`)
    .join('\n')
}

export const THINK_ACTION_INSTRUCTION =
  'You should first reason step-by-step about the current situation. This reasoning process MUST be enclosed ' +
  'within <think> </think> tags.\nOnce you have finished your reasoning, you should choose an admissible action ' +
  'for the current step and present it within <action> </action> tags.'

export const THINK_ACTION_INSTRUCTION_COMPACT = 'Reply <think>…</think><action>…</action>.'

/** Joins entity names for prose ("a, b and c"). */
export function listText(items: string[]): string {
  if (items.length <= 1) return items.join('')
  return `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`
}
