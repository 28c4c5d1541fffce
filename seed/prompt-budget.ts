// Prompt-length accounting and truncation (docs/algorithm.md §13). Two policies (`prompt.truncation`):
// `drop-oldest` (the default): a prompt that does not fit loses its oldest history entries first; the task line,
// an inserted block (skill) and the response are never cut, and a block that cannot fit even without history is
// dropped whole, with a reason the caller counts. `left` (the reference's): the full rendering is kept and the
// leftmost tokens of its tokenization are cut; this module says how many, the codec cuts the ids
// (compute/prompts.ts). Pure functions over strings, given the tokenizer's count.
import { type AnalyzerEpisode, analyzerPrompt } from './analyzer.ts'
import { SeedInputError } from './errors.ts'
import { insertBlock } from './skill-context.ts'

export type CountTokens = (text: string) => number

/**
 * History entries as the environments render them, oldest first:
 * - `observationAction`: verl-agent's `[Observation k: '…', Action k: '…']` (household, shop, sokoban);
 * - `searchStep`: Search-R1's `Step k:<search>…</search> …<information>…</information>`.
 */
export const HISTORY_ENTRY = {
  observationAction: /\[Observation (\d+): '[\s\S]*?', Action \1: '[\s\S]*?'\]/g,
  searchStep: /Step \d+:[\s\S]*?<\/information>/g,
} as const satisfies Record<string, RegExp>

/** A step prompt cut into the part before the history, the history entries (oldest first) and the rest. */
export interface PromptLayout {
  head: string
  entries: readonly string[]
  /** Text between entries i and i + 1. */
  gaps: readonly string[]
  tail: string
}

/** Finds the history entries in a rendered prompt; a prompt without any is all head. */
export function splitHistory(prompt: string, entry: RegExp = HISTORY_ENTRY.observationAction): PromptLayout {
  const pattern = new RegExp(entry.source, entry.flags.includes('g') ? entry.flags : `${entry.flags}g`)
  const matches = [...prompt.matchAll(pattern)]
  if (matches.length === 0) return { head: prompt, entries: [], gaps: [], tail: '' }
  const starts = matches.map((m) => m.index)
  const ends = matches.map((m) => m.index + m[0].length)
  return {
    head: prompt.slice(0, starts[0]),
    entries: matches.map((m) => m[0]),
    gaps: starts.slice(1).map((s, i) => prompt.slice(ends[i], s)),
    tail: prompt.slice(ends[ends.length - 1]),
  }
}

/** The prompt with its `dropOldest` oldest history entries left out. */
export function renderLayout(layout: PromptLayout, dropOldest = 0): string {
  let text = layout.head
  for (let i = dropOldest; i < layout.entries.length; i++) {
    text += layout.entries[i]
    if (i + 1 < layout.entries.length) text += layout.gaps[i]
  }
  return text + layout.tail
}

/**
 * How a prompt over its budget is fitted (`prompt.truncation`, docs/algorithm.md §13):
 * - `drop-oldest`: whole history entries (analyzer steps) leave, oldest first, then the whole block; the task line
 *   and the block are never cut;
 * - `left`: the reference's: the full rendering (all history, the block inserted, all analyzer steps) is tokenized
 *   with the chat template and its leftmost tokens are cut, so the chat header, the task line and the skill go first.
 */
export type PromptTruncation = 'drop-oldest' | 'left'

export interface PromptBudget {
  countTokens: CountTokens
  /** Default `drop-oldest`. */
  truncation?: PromptTruncation
  /** The most prompt tokens allowed (`max_prompt_length`). */
  maxPromptTokens: number
  /** With `contextLength`: the response (or answer) needs this many tokens after the prompt, never cut. */
  responseTokens?: number
  contextLength?: number
}

export type FitFailure = 'response-too-long' | 'protected-too-long'

export type FitResult =
  | {
      ok: true
      prompt: string
      tokens: number
      /** History entries (or analyzer steps) left out. */
      dropped: number
      /** The block could not fit even without history, so the prompt goes without it. */
      blockDropped: boolean
      /**
       * `left` only: the leftmost tokens of `prompt`'s tokenization cut to fit (the model sees the last `tokens`
       * of them); 0 when the prompt fits, and always under `drop-oldest`.
       */
      tokensCut: number
    }
  | { ok: false; code: FitFailure; reason: string; tokens: number; budget: number }

/** Prompt tokens available: max_prompt_length, further limited by the context minus the response. */
export function promptBudget(budget: PromptBudget): number {
  const { maxPromptTokens, responseTokens = 0, contextLength } = budget
  for (const [name, v] of Object.entries({ maxPromptTokens, responseTokens })) {
    if (!Number.isInteger(v) || v < 0)
      throw new SeedInputError(`prompt budget: ${name} must be an integer ≥ 0, got ${v}`)
  }
  if (contextLength === undefined) return maxPromptTokens
  if (!Number.isInteger(contextLength) || contextLength < 1) {
    throw new SeedInputError(`prompt budget: contextLength must be a positive integer, got ${contextLength}`)
  }
  return Math.min(maxPromptTokens, contextLength - responseTokens)
}

/**
 * Fits a step prompt (ordinary, or with `block` inserted for the teacher or a library skill) into the budget.
 * `drop-oldest`: drops the oldest history entries first; if the prompt with the block does not fit even without
 * history, drops the block (counted) and fits the prompt alone; fails only when the prompt's protected parts alone
 * (everything but the history) exceed the budget. `left`: the whole prompt with the block, its leftmost tokens cut.
 */
export function fitStepPrompt(
  prompt: string | PromptLayout,
  budget: PromptBudget & { block?: string; historyEntry?: RegExp },
): FitResult {
  const layout = typeof prompt === 'string' ? splitHistory(prompt, budget.historyEntry) : prompt
  const limit = promptBudget(budget)
  if (limit < 0) return responseTooLong(budget, limit)
  const block = budget.block?.trim() ?? ''
  if (budget.truncation === 'left') {
    const text = renderLayout(layout)
    return fitLeft(block ? insertBlock(text, block) : text, limit, budget.countTokens, 'step prompt')
  }
  const attempt = (withBlock: boolean): (FitResult & { ok: true }) | null => {
    for (let drop = 0; drop <= layout.entries.length; drop++) {
      const text = renderLayout(layout, drop)
      const candidate = withBlock ? insertBlock(text, block) : text
      const tokens = budget.countTokens(candidate)
      if (tokens <= limit)
        return { ok: true, prompt: candidate, tokens, dropped: drop, blockDropped: false, tokensCut: 0 }
    }
    return null
  }
  if (block) {
    const fitted = attempt(true)
    if (fitted) return fitted
  }
  const plain = attempt(false)
  if (plain) return { ...plain, blockDropped: block.length > 0 }
  const minimal = renderLayout(layout, layout.entries.length)
  const tokens = budget.countTokens(minimal)
  return {
    ok: false,
    code: 'protected-too-long',
    reason: `the prompt without history needs ${tokens} tokens, the budget is ${limit}`,
    tokens,
    budget: limit,
  }
}

/**
 * Fits the analyzer prompt: `drop-oldest` leaves out the oldest steps first (the prompt says how many), never the
 * header, the task line or the last step; `left` cuts the leftmost tokens of the whole prompt. `responseTokens`
 * reserves room for the answer (the skill JSON).
 */
export function fitAnalyzerPrompt(episode: AnalyzerEpisode, budget: PromptBudget): FitResult {
  const limit = promptBudget(budget)
  if (limit < 0) return responseTooLong(budget, limit)
  if (budget.truncation === 'left')
    return fitLeft(analyzerPrompt(episode), limit, budget.countTokens, 'analyzer prompt')
  const last = Math.max(0, episode.steps.length - 1)
  for (let first = 0; first <= last; first++) {
    const prompt = analyzerPrompt(episode, { firstStep: first })
    const tokens = budget.countTokens(prompt)
    if (tokens <= limit) return { ok: true, prompt, tokens, dropped: first, blockDropped: false, tokensCut: 0 }
  }
  const tokens = budget.countTokens(analyzerPrompt(episode, { firstStep: last }))
  return {
    ok: false,
    code: 'protected-too-long',
    reason: `the analyzer prompt with only its last step needs ${tokens} tokens, the budget is ${limit}`,
    tokens,
    budget: limit,
  }
}

/**
 * `left` truncation of a whole prompt: unchanged when it fits; otherwise the same text with the count of leftmost
 * tokens to cut, keeping exactly `limit` (the codec cuts the ids: compute/prompts.ts).
 */
function fitLeft(prompt: string, limit: number, countTokens: CountTokens, what: string): FitResult {
  const tokens = countTokens(prompt)
  if (tokens <= limit) return { ok: true, prompt, tokens, dropped: 0, blockDropped: false, tokensCut: 0 }
  if (limit === 0) {
    return {
      ok: false,
      code: 'protected-too-long',
      reason: `the ${what} needs ${tokens} tokens and the budget keeps none of them`,
      tokens,
      budget: limit,
    }
  }
  return { ok: true, prompt, tokens: limit, dropped: 0, blockDropped: false, tokensCut: tokens - limit }
}

export interface FitTally {
  prompts: number
  /** Prompts that lost history entries or steps, or (`left`) leftmost tokens. */
  truncated: number
  /** Prompts whose block (skill) was dropped because it could not fit. */
  blockDropped: number
  /** Prompts that could not fit at all. */
  failed: number
  failures: Record<FitFailure, number>
}

/** Counts fit outcomes, for the per-phase truncation metrics. */
export function tallyFits(results: readonly FitResult[]): FitTally {
  const tally: FitTally = {
    prompts: results.length,
    truncated: 0,
    blockDropped: 0,
    failed: 0,
    failures: { 'response-too-long': 0, 'protected-too-long': 0 },
  }
  for (const r of results) {
    if (!r.ok) {
      tally.failed++
      tally.failures[r.code]++
      continue
    }
    if (r.dropped > 0 || r.tokensCut > 0) tally.truncated++
    if (r.blockDropped) tally.blockDropped++
  }
  return tally
}

function responseTooLong(budget: PromptBudget, limit: number): FitResult {
  return {
    ok: false,
    code: 'response-too-long',
    reason: `the response needs ${budget.responseTokens} of ${budget.contextLength} context tokens`,
    tokens: 0,
    budget: limit,
  }
}
