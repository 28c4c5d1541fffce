// Analyze (docs/algorithm.md §3, §4): every finished trajectory becomes one hindsight skill. Stage 2 asks the
// policy itself (greedy, analyzer prompt → JSON, parsed leniently; a failure is counted and that trajectory gets
// no OPD signal); Stage 1 annotation asks the environment's oracle analyzer, whose JSON goes through the same
// parser so both paths produce the same records.
import { createHash } from 'node:crypto'
import { getEnv } from '../../envs/index.ts'
import { mulberry32 } from '../../envs/rng.ts'
import { generate } from '../../policy/generate.ts'
import type { PromptSettings, RunEnvName } from '../../seed/config.ts'
import {
  type AnalyzerEpisode,
  type AnalyzerParseFailure,
  episodeOutcome,
  type ParseStats,
  parseAnalyzerOutput,
  parseStats,
} from '../../seed/index.ts'
import type { Policy, PromptCodec } from './policy.ts'
import { analyzerObservation, fitAnalyzer, type PromptBudgetSettings } from './prompts.ts'
import type { RolloutTrajectory } from './rollout.ts'

export interface SkillRecord {
  trajectory: number
  ok: boolean
  summary: string | null
  skill: string | null
  failure: { code: AnalyzerParseFailure; reason: string } | null
  /** The analyzer's raw answer. */
  raw: string
  /** The fitted analyzer prompt and its sha256. */
  prompt: string
  promptHash: string
  /** Oldest steps left out of the analyzer prompt to fit the budget. */
  stepsDropped: number
}

export interface AnalyzeStats {
  parse: ParseStats
  /** Analyzer prompts that lost steps to the budget. */
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
  return { maxPromptTokens: input.maxPromptTokens, responseTokens: input.maxAnswerTokens, contextLength }
}

function record(t: RolloutTrajectory, prompt: string, stepsDropped: number, raw: string): SkillRecord {
  const parsed = parseAnalyzerOutput(raw)
  return {
    trajectory: t.id,
    ok: parsed.ok,
    summary: parsed.ok ? parsed.output.episodeSummary : null,
    skill: parsed.ok ? parsed.output.episodeSkill : null,
    failure: parsed.ok ? null : { code: parsed.code, reason: parsed.reason },
    raw,
    prompt,
    promptHash: createHash('sha256').update(prompt).digest('hex'),
    stepsDropped,
  }
}

function summarize(skills: SkillRecord[], newTokens: number, started: number): AnalyzeResult {
  return {
    skills,
    stats: {
      parse: parseStats(
        skills.map((s) =>
          s.ok
            ? { ok: true, output: { episodeSummary: s.summary ?? '', episodeSkill: s.skill ?? '' } }
            : { ok: false, code: s.failure!.code, reason: s.failure!.reason },
        ),
      ),
      truncated: skills.filter((s) => s.stepsDropped > 0).length,
      newTokens,
      seconds: (performance.now() - started) / 1000,
    },
  }
}

/** The policy analyzes each trajectory (greedy decoding, stops after the JSON object closes). */
export async function analyze(analyzer: Policy, input: AnalyzeInput): Promise<AnalyzeResult> {
  const started = performance.now()
  const budget = budgetOf(input, analyzer.model.config.maxPositions)
  const skills: SkillRecord[] = []
  let newTokens = 0
  for (let from = 0; from < input.trajectories.length; from += input.batchSize) {
    const batch = input.trajectories.slice(from, from + input.batchSize)
    const fits = batch.map((t) => fitAnalyzer(analyzer.codec, analyzerEpisode(t, input.prompt), budget))
    const out = await generate(
      analyzer.model,
      fits.map((f) => analyzer.codec.promptIds(f.prompt)),
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
      skills.push(record(t, fit.prompt, fit.dropped, analyzer.codec.decode(out.sequences[i]!.tokens)))
    })
  }
  return summarize(skills, newTokens, started)
}

/** Stage 1 annotation by the environment's oracle analyzer; prompts fitted as the policy will see them. */
export function annotateWithOracle(
  env: RunEnvName,
  codec: PromptCodec,
  contextLength: number,
  input: AnalyzeInput,
): AnalyzeResult {
  const started = performance.now()
  const e = getEnv(env)
  const budget = budgetOf(input, contextLength)
  const skills = input.trajectories.map((t) => {
    const fit = fitAnalyzer(codec, analyzerEpisode(t, input.prompt), budget)
    return record(t, fit.prompt, fit.dropped, oracleAnswer(e.oracle(t.trajectory).output))
  })
  return summarize(skills, 0, started)
}

/** The oracle's JSON answer, as the SFT target: exactly the two fields, in the analyzer's return format. */
export function oracleAnswer(output: { episode_summary: string; episode_skill: string }): string {
  return JSON.stringify({ episode_summary: output.episode_summary, episode_skill: output.episode_skill })
}
