// Step prompts as the phases render and fit them (docs/algorithm.md §13): the environment's prompt, optionally
// compacted, with the run's history window, then fitted into the token budget with or without a skill block.
// The same functions serve acting (rollout, evaluate) and the teacher prompt (rescore).
import type { Episode } from '../../envs/types.ts'
import type { PromptSettings } from '../../seed/config.ts'
import {
  type AnalyzerEpisode,
  type FitResult,
  fitAnalyzerPrompt,
  fitStepPrompt,
  renderLayout,
  splitHistory,
} from '../../seed/index.ts'
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
  const raw = episode.prompt({ compact: settings.compact })
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
}

/** The budget of seed/prompt-budget for this codec. */
function promptBudget(codec: PromptCodec, budget: PromptBudgetSettings) {
  return {
    countTokens: codec.countPromptTokens,
    maxPromptTokens: budget.maxPromptTokens,
    responseTokens: budget.responseTokens,
    contextLength: budget.contextLength,
  }
}

/** Fits a step prompt (with `block` inserted when given); a prompt whose protected parts cannot fit throws. */
export function fitPrompt(
  codec: PromptCodec,
  text: string,
  budget: PromptBudgetSettings,
  block?: string,
): FitResult & { ok: true } {
  const fit = fitStepPrompt(text, { ...promptBudget(codec, budget), ...(block ? { block } : {}) })
  if (!fit.ok) {
    throw new PromptBudgetError(
      `step prompt does not fit: ${fit.reason} (max prompt ${budget.maxPromptTokens}, response ${budget.responseTokens}, context ${budget.contextLength})`,
    )
  }
  return fit
}

/** Fits an analyzer prompt (oldest steps left out first); null when even the last step alone does not fit. */
export function fitAnalyzer(
  codec: PromptCodec,
  episode: AnalyzerEpisode,
  budget: PromptBudgetSettings,
): FitResult & { ok: true } {
  const fit = fitAnalyzerPrompt(episode, promptBudget(codec, budget))
  if (!fit.ok) throw new PromptBudgetError(`analyzer prompt does not fit: ${fit.reason}`)
  return fit
}
