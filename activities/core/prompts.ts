// Step prompts as the phases render and fit them (reference section 13): the environment's prompt, optionally
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

/** ` # \t` cells (RAGEN / verl-agent grids) written as `#`; other text unchanged. */
export function compactGrid(text: string): string {
  return text.replace(/ (\S) \t/g, '$1')
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

/** Observations as the analyzer sees them, in the same rendering as the step prompts. */
export function analyzerObservation(observation: string, settings: PromptSettings): string {
  return settings.compactGrids ? compactGrid(observation) : observation
}

export class PromptBudgetError extends CorePhaseError {
  override name = 'PromptBudgetError'
}

export interface PromptBudgetSettings {
  maxPromptTokens: number
  responseTokens: number
  contextLength: number
}

/** Fits a step prompt (with `block` inserted when given); a prompt whose protected parts cannot fit throws. */
export function fitPrompt(
  codec: PromptCodec,
  text: string,
  budget: PromptBudgetSettings,
  block?: string,
): FitResult & { ok: true } {
  const fit = fitStepPrompt(text, {
    countTokens: codec.countPromptTokens,
    maxPromptTokens: budget.maxPromptTokens,
    responseTokens: budget.responseTokens,
    contextLength: budget.contextLength,
    ...(block ? { block } : {}),
  })
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
  const fit = fitAnalyzerPrompt(episode, {
    countTokens: codec.countPromptTokens,
    maxPromptTokens: budget.maxPromptTokens,
    responseTokens: budget.responseTokens,
    contextLength: budget.contextLength,
  })
  if (!fit.ok) throw new PromptBudgetError(`analyzer prompt does not fit: ${fit.reason}`)
  return fit
}
