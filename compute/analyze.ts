// Analyze (docs/algorithm.md §3, §4): every finished trajectory becomes one hindsight skill. Stage 2 asks the
// policy itself (greedy, analyzer prompt → JSON, parsed leniently; a failure is counted and that trajectory gets
// no OPD signal); Stage 1 annotation asks the environment's oracle analyzer, whose JSON goes through the same
// parser so both paths produce the same records.
import { mulberry32 } from '../envs/rng.ts'
import { generate } from '../policy/generate.ts'
import type { PromptSettings, RunEnvSpec } from '../seed/config.ts'
import {
  type AnalyzerEpisode,
  type AnalyzerParseFailure,
  episodeOutcome,
  type ParseStats,
  parseAnalyzerOutput,
  parseStats,
} from '../seed/index.ts'
import {
  type AnnotationAnswer,
  type AnnotationRequest,
  type Annotator,
  type AnnotatorStats,
  type AnswerSource,
  oracleAnnotator,
  oracleAnswer,
  promptHashOf,
} from './annotator.ts'
import type { Policy, PromptCodec } from './policy.ts'
import { analyzerObservation, type FittedPrompt, fitAnalyzer, type PromptBudgetSettings } from './prompts.ts'
import type { RolloutTrajectory } from './rollout.ts'

export interface SkillRecord {
  trajectory: number
  ok: boolean
  summary: string | null
  skill: string | null
  /** Why there is no skill: the answer did not parse, or (Stage 1's external annotator) no answer came. */
  failure: { code: AnalyzerParseFailure | 'request-failed'; reason: string } | null
  /** The analyzer's raw answer ('' when no answer came). */
  raw: string
  /**
   * The SFT target when the raw answer is not already it: the parsed fields as the two-key JSON (an external
   * annotator's reply may wrap its JSON in prose); absent for the oracle, whose raw answer is that JSON.
   */
  answer?: string
  /** Who wrote the answer, where it was not the policy or the oracle (Stage 1's external annotator). */
  source?: AnswerSource
  /**
   * The fitted analyzer prompt and its sha256. Under `left` truncation it is the full prompt and the model saw its
   * tokenization less `promptTokensCut` leftmost ids (prompts.ts `promptContext`; docs/algorithm.md §13): the text
   * stays whole, since a cut at a token boundary cannot be written back as text that tokenizes the same.
   */
  prompt: string
  promptHash: string
  /** Oldest steps left out of the analyzer prompt to fit the budget. */
  stepsDropped: number
  /** Leftmost prompt tokens `left` truncation cut; absent when none. */
  promptTokensCut?: number
}

export interface AnalyzeStats {
  parse: ParseStats
  /** Analyzer prompts that lost steps (or, under `left`, leftmost tokens) to the budget. */
  truncated: number
  newTokens: number
  seconds: number
}

export interface AnalyzeResult {
  skills: SkillRecord[]
  stats: AnalyzeStats
}

export interface AnalyzeInput {
  trajectories: readonly RolloutTrajectory[]
  prompt: PromptSettings
  maxPromptTokens: number
  maxAnswerTokens: number
  /** Trajectories per generate call. */
  batchSize: number
}

/** The analyzer's view of a trajectory: raw observations (in the run's rendering), full responses, validity. */
export function analyzerEpisode(t: RolloutTrajectory, settings: PromptSettings): AnalyzerEpisode {
  return {
    task: t.trajectory.taskText,
    outcome: episodeOutcome(t.totalReward),
    steps: t.trajectory.steps.map((s) => ({
      observation: analyzerObservation(s.observation, settings),
      response: s.response,
      valid: s.valid,
    })),
  }
}

function budgetOf(input: AnalyzeInput, contextLength: number): PromptBudgetSettings {
  return {
    maxPromptTokens: input.maxPromptTokens,
    responseTokens: input.maxAnswerTokens,
    contextLength,
    truncation: input.prompt.truncation,
  }
}

/** How a record says its prompt was truncated. */
type Truncation = Pick<SkillRecord, 'stepsDropped' | 'promptTokensCut'>

function truncationOf(fit: FittedPrompt): Truncation {
  return { stepsDropped: fit.dropped, ...(fit.tokensCut > 0 ? { promptTokensCut: fit.tokensCut } : {}) }
}

function record(t: RolloutTrajectory, prompt: string, truncation: Truncation, raw: string): SkillRecord {
  const parsed = parseAnalyzerOutput(raw)
  return {
    trajectory: t.id,
    ok: parsed.ok,
    summary: parsed.ok ? parsed.output.episodeSummary : null,
    skill: parsed.ok ? parsed.output.episodeSkill : null,
    failure: parsed.ok ? null : { code: parsed.code, reason: parsed.reason },
    raw,
    prompt,
    promptHash: promptHashOf(prompt),
    ...truncation,
  }
}

/** The record of one annotator answer: parsed like the policy's, or a request failure with no answer. */
function annotationRecord(request: AnnotationRequest, truncation: Truncation, answer: AnnotationAnswer): SkillRecord {
  if (!answer.ok) {
    return {
      trajectory: request.trajectory.id,
      ok: false,
      summary: null,
      skill: null,
      failure: { code: 'request-failed', reason: answer.reason },
      raw: '',
      prompt: request.prompt,
      promptHash: request.promptHash,
      ...truncation,
    }
  }
  const r = record(request.trajectory, request.prompt, truncation, answer.raw)
  if (!answer.source) return r
  const target = r.ok ? oracleAnswer({ episode_summary: r.summary ?? '', episode_skill: r.skill ?? '' }) : undefined
  return { ...r, ...(target !== undefined && target !== r.raw ? { answer: target } : {}), source: answer.source }
}

function summarize(skills: SkillRecord[], newTokens: number, started: number): AnalyzeResult {
  return {
    skills,
    stats: {
      // over the answers there are: a trajectory with no answer is counted by its annotator, not as a parse
      parse: parseStats(
        skills
          .filter((s) => s.failure?.code !== 'request-failed')
          .map((s) =>
            s.ok
              ? { ok: true, output: { episodeSummary: s.summary ?? '', episodeSkill: s.skill ?? '' } }
              : { ok: false, code: s.failure!.code as AnalyzerParseFailure, reason: s.failure!.reason },
          ),
      ),
      truncated: skills.filter((s) => s.stepsDropped > 0 || (s.promptTokensCut ?? 0) > 0).length,
      newTokens,
      seconds: (performance.now() - started) / 1000,
    },
  }
}

/** The trajectories there is something to analyze of: not those the environment failed (they have no steps). */
function analyzable(trajectories: readonly RolloutTrajectory[]): readonly RolloutTrajectory[] {
  return trajectories.filter((t) => !t.failure)
}

/** The policy analyzes each trajectory (greedy decoding, stops after the JSON object closes). */
export async function analyze(analyzer: Policy, input: AnalyzeInput): Promise<AnalyzeResult> {
  const started = performance.now()
  const budget = budgetOf(input, analyzer.model.config.maxPositions)
  const skills: SkillRecord[] = []
  let newTokens = 0
  const trajectories = analyzable(input.trajectories)
  for (let from = 0; from < trajectories.length; from += input.batchSize) {
    const batch = trajectories.slice(from, from + input.batchSize)
    const fits = batch.map((t) => fitAnalyzer(analyzer.codec, analyzerEpisode(t, input.prompt), budget))
    const out = await generate(
      analyzer.model,
      fits.map((f) => f.ids),
      {
        maxNewTokens: input.maxAnswerTokens,
        temperature: 1,
        greedy: true,
        eosIds: analyzer.codec.eosIds,
        stop: ['}'],
        decode: analyzer.codec.decode,
        rngs: batch.map((t) => mulberry32(t.id)),
      },
    )
    newTokens += out.stats.newTokens
    batch.forEach((t, i) => {
      const fit = fits[i]!
      skills.push(record(t, fit.prompt, truncationOf(fit), analyzer.codec.decode(out.sequences[i]!.tokens)))
    })
  }
  return summarize(skills, newTokens, started)
}

export interface AnnotateResult extends AnalyzeResult {
  annotator: AnnotatorStats
}

/**
 * Stage 1 annotation: every trajectory's analyzer prompt, fitted as the policy will see it in SFT, answered by
 * `annotator` (the oracle or an external endpoint) and parsed like the policy's own answers. Under `left`
 * truncation the annotator is asked the full prompt (the cut is the policy's context limit, not the text's) and
 * the record keeps how many leftmost tokens the policy's SFT pair loses (docs/algorithm.md §13).
 */
export async function annotateWith(
  annotator: Annotator,
  codec: PromptCodec,
  contextLength: number,
  input: AnalyzeInput,
  onProgress?: (done: number, total: number) => void,
): Promise<AnnotateResult> {
  const started = performance.now()
  const budget = budgetOf(input, contextLength)
  const trajectories = analyzable(input.trajectories)
  const fits = trajectories.map((t) => fitAnalyzer(codec, analyzerEpisode(t, input.prompt), budget))
  const requests = trajectories.map((t, i) => ({
    trajectory: t,
    prompt: fits[i]!.prompt,
    promptHash: promptHashOf(fits[i]!.prompt),
  }))
  const answered = await annotator.annotate(requests, onProgress)
  const skills = requests.map((r, i) => annotationRecord(r, truncationOf(fits[i]!), answered.answers[i]!))
  return { ...summarize(skills, 0, started), annotator: answered.stats }
}

/** Stage 1 annotation by the environment's oracle analyzer; prompts fitted as the policy will see them. */
export function annotateWithOracle(
  env: RunEnvSpec,
  codec: PromptCodec,
  contextLength: number,
  input: AnalyzeInput,
): Promise<AnnotateResult> {
  return annotateWith(oracleAnnotator(env), codec, contextLength, input)
}

export { oracleAnswer }
