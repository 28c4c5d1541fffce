// Step prompts as the phases render and fit them (docs/algorithm.md §13): the environment's prompt, optionally
// compacted, with the run's history window, then fitted into the token budget with or without a skill block, under
// the run's `prompt.truncation`, into the context ids the model sees. The same functions serve acting (rollout,
// evaluate), the teacher prompt (rescore), the analyzer (analyze, annotate) and the warm-start's demonstrations.
import type { Episode } from '../envs/types.ts'
import type { PromptSettings } from '../seed/config.ts'
import {
  type AnalyzerEpisode,
  type FitResult,
  fitAnalyzerPrompt,
  fitStepPrompt,
  type PromptBudget,
  type PromptTruncation,
  renderLayout,
  splitHistory,
} from '../seed/index.ts'
import { CorePhaseError, type PromptCodec } from './policy.ts'

/**
 * Grid rows written as `# # O X _ #`: one byte-level BPE token per cell (a space-led symbol), so every cell
 * has the same token pattern wherever it sits. Rewrites rows of ` # \t` cells (RAGEN / verl-agent grids) and
 * rows already written without separators (a line of 3+ symbols and capitals, no spaces, lowercase or digits,
 * as compact prompts render them); other text is unchanged. Opt-in (`compactGrids`), for grid environments.
 * Measured on the tiny sokoban model: dense rows learned far sooner (48% vs 4.5% validation success after the
 * same 160 behaviour-cloning steps), so the CPU preset leaves this off.
 */
export function compactGrid(text: string): string {
  return text
    .replace(/(?: \S \t)+/g, (row) => row.replace(/ (\S) \t/g, ' $1').trimStart())
    .replace(/^[^\sa-z0-9]{3,}$/gmu, (row) => [...row].join(' '))
}

/** Keeps the newest `window` history entries of a rendered prompt. */
export function keepHistory(text: string, window: number): string {
  const layout = splitHistory(text)
  const drop = Math.max(0, layout.entries.length - window)
  return drop === 0 ? text : renderLayout(layout, drop)
}

/** The ordinary step prompt of an episode under the run's prompt settings (no skill, not yet fitted). */
export function stepPrompt(episode: Episode, settings: PromptSettings): string {
  return stepPromptText(episode.prompt({ compact: settings.compact }), settings)
}

/** The step prompt from the environment's own (`Episode.prompt`, or a remote server's /prompt), as stepPrompt. */
export function stepPromptText(raw: string, settings: PromptSettings): string {
  const text = settings.compactGrids ? compactGrid(raw) : raw
  return keepHistory(text, settings.historyWindow)
}

/**
 * Observations as the analyzer sees them: with compact prompts (or `compactGrids`), grids as dense rows
 * (`##OX_#`, the environment's own compact form), since a whole trajectory of them must fit the analyzer's budget.
 */
export function analyzerObservation(observation: string, settings: PromptSettings): string {
  return settings.compact || settings.compactGrids ? observation.replace(/ (\S) \t/g, '$1') : observation
}

export class PromptBudgetError extends CorePhaseError {
  override name = 'PromptBudgetError'
}

export interface PromptBudgetSettings {
  maxPromptTokens: number
  responseTokens: number
  contextLength: number
  /** `prompt.truncation`; default `drop-oldest`. */
  truncation?: PromptTruncation
}

/** The step prompts' budget of a run's prompt settings, for a model of `contextLength` positions. */
export function stepBudget(prompt: PromptSettings, contextLength: number): PromptBudgetSettings {
  return {
    maxPromptTokens: prompt.maxPromptTokens,
    responseTokens: prompt.maxResponseTokens,
    contextLength,
    truncation: prompt.truncation,
  }
}

/**
 * A prompt fitted to its budget with the context ids the model sees: the chat-templated tokenization of `prompt`
 * less its `tokensCut` leftmost ids (docs/algorithm.md §13). Under `left`, `prompt` is the full rendering and only
 * the ids are cut; records that keep a prompt's text keep `tokensCut` with it (`promptContext` gives the ids back).
 */
export type FittedPrompt = FitResult & { ok: true } & { ids: number[] }

/** The budget of seed/prompt-budget for this codec. */
function promptBudget(codec: PromptCodec, budget: PromptBudgetSettings): PromptBudget {
  return {
    countTokens: codec.countPromptTokens,
    maxPromptTokens: budget.maxPromptTokens,
    responseTokens: budget.responseTokens,
    contextLength: budget.contextLength,
    ...(budget.truncation ? { truncation: budget.truncation } : {}),
  }
}

/** The context ids of a prompt text whose `tokensCut` leftmost tokens were cut (`left` truncation). */
export function promptContext(codec: PromptCodec, prompt: string, tokensCut = 0): number[] {
  const ids = codec.promptIds(prompt)
  return tokensCut > 0 ? ids.slice(tokensCut) : ids
}

/**
 * The ids of a fit. A left cut keeps exactly the fit's `tokens` last ids, so that a count that is not exact (the
 * ChatML codec counts the text apart from its header) cannot leave the prompt over its budget.
 */
function withIds(codec: PromptCodec, fit: FitResult & { ok: true }): FittedPrompt {
  const full = codec.promptIds(fit.prompt)
  if (fit.tokensCut === 0) return { ...fit, ids: full }
  const tokensCut = Math.max(0, full.length - fit.tokens)
  const ids = full.slice(tokensCut)
  return { ...fit, tokens: ids.length, tokensCut, ids }
}

/**
 * Fits a step prompt (with `block` inserted when given) under the budget's truncation policy, with the ids the
 * model sees; a prompt that fits in no way throws. Every step prompt goes through here: acting (rollout,
 * evaluate), the teacher's (rescore) and the warm-start's demonstrations.
 */
export function fitPrompt(
  codec: PromptCodec,
  text: string,
  budget: PromptBudgetSettings,
  block?: string,
): FittedPrompt {
  const fit = fitStepPrompt(text, { ...promptBudget(codec, budget), ...(block ? { block } : {}) })
  if (!fit.ok) {
    throw new PromptBudgetError(
      `step prompt does not fit: ${fit.reason} (max prompt ${budget.maxPromptTokens}, response ${budget.responseTokens}, context ${budget.contextLength})`,
    )
  }
  return withIds(codec, fit)
}

/**
 * Fits an analyzer prompt under the budget's truncation policy (`drop-oldest`: oldest steps left out first), with
 * the ids the model sees; throws when it fits in no way (even the last step alone is too long).
 */
export function fitAnalyzer(codec: PromptCodec, episode: AnalyzerEpisode, budget: PromptBudgetSettings): FittedPrompt {
  const fit = fitAnalyzerPrompt(episode, promptBudget(codec, budget))
  if (!fit.ok) throw new PromptBudgetError(`analyzer prompt does not fit: ${fit.reason}`)
  return withIds(codec, fit)
}
