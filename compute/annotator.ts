// Stage 1's annotator (docs/algorithm.md §2): whoever writes the skill for each fitted analyzer prompt. Two kinds
// sit behind one interface, so Stage 1 has one path: the environment's oracle (seedflow's default), and an
// external OpenAI-compatible endpoint (the paper's, openai-annotator.ts). An annotator answers with raw text or a
// per-trajectory failure; the caller parses every answer with the same lenient parser.
import { createHash } from 'node:crypto'
import { EnvHttpError } from '../envs/http/index.ts'
import type { RunEnvSpec } from '../seed/config.ts'
import { environmentOf } from './environment.ts'
import type { RolloutTrajectory } from './rollout.ts'

/** One trajectory to annotate: its fitted analyzer prompt (the user message) and that prompt's sha256. */
export interface AnnotationRequest {
  trajectory: RolloutTrajectory
  prompt: string
  promptHash: string
}

/** Who answered, for the library's audit (no credentials: the endpoint's host only). */
export interface AnswerSource {
  model: string
  host: string
  finishReason: string | null
  /** True when the reply was read back from the store (an earlier attempt received it). */
  reused: boolean
}

export type AnnotationAnswer =
  | { ok: true; raw: string; source?: AnswerSource }
  /** No answer (HTTP errors after retries, a timeout): the trajectory gets no skill. */
  | { ok: false; reason: string }

/** What an annotator did, summed over a batch; every field is a count. */
export interface AnnotatorStats {
  /** HTTP requests sent (first tries and retries). */
  requests: number
  retries: number
  /** Trajectories left without an answer after their retries. */
  requestFailures: number
  /** Answers read back from the store instead of asked again. */
  reused: number
  promptTokens: number
  completionTokens: number
}

export interface Annotator {
  annotate(
    requests: readonly AnnotationRequest[],
    onProgress?: (done: number, total: number) => void,
  ): Promise<{ answers: AnnotationAnswer[]; stats: AnnotatorStats }>
}

export function emptyAnnotatorStats(): AnnotatorStats {
  return { requests: 0, retries: 0, requestFailures: 0, reused: 0, promptTokens: 0, completionTokens: 0 }
}

/** The environment's oracle analyzer: a hindsight skill from facts visible in the trajectory's own text. */
export function oracleAnnotator(env: RunEnvSpec): Annotator {
  const e = environmentOf(env)
  return {
    async annotate(requests) {
      // a remote oracle's failure leaves that trajectory without a skill, as an endpoint's failure does
      const answers = await Promise.all(
        requests.map(async (r): Promise<AnnotationAnswer> => {
          try {
            return { ok: true, raw: oracleAnswer((await e.oracle(r.trajectory.trajectory)).output) }
          } catch (error) {
            if (!(error instanceof EnvHttpError)) throw error
            return { ok: false, reason: error.message }
          }
        }),
      )
      const stats = emptyAnnotatorStats()
      stats.requestFailures = answers.filter((a) => !a.ok).length
      return { answers, stats }
    },
  }
}

/** The sha256 of an analyzer prompt: how records and stored replies name it. */
export function promptHashOf(prompt: string): string {
  return createHash('sha256').update(prompt).digest('hex')
}

/** The oracle's JSON answer, as the SFT target: exactly the two fields, in the analyzer's return format. */
export function oracleAnswer(output: { episode_summary: string; episode_skill: string }): string {
  return JSON.stringify({ episode_summary: output.episode_summary, episode_skill: output.episode_skill })
}
