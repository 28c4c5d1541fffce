// The external Stage 1 annotator (docs/algorithm.md §2, the paper's): each fitted analyzer prompt goes as one user
// message (the reference sends no system message) to an OpenAI-compatible chat completions endpoint through the
// official client, a few requests in flight at once. A request that fails is retried after a 408, 409, 429, 5xx,
// timeout or connection error, waiting what Retry-After says (else an exponential backoff); one that still fails
// leaves its trajectory without a skill and is counted, nothing else fails. Every reply is stored as it arrives
// (keyed by prompt hash), so a retried attempt asks only for the replies it does not have yet. The API key is
// read from the named environment variable when annotating and is never stored, logged or put in an error: every
// text that leaves this module has the key's value cut out, even one a server echoed back.
import OpenAI from 'openai'
import { z } from 'zod'
import type { OpenAIAnnotatorConfig } from '../seed/config.ts'
import type { AnnotationAnswer, AnnotationRequest, Annotator, AnnotatorStats } from './annotator.ts'

/** A reply as stored: who answered what, for the library's audit and for reuse. No credentials. */
export interface StoredReply {
  version: 1
  promptHash: string
  model: string
  /** The endpoint's host (`127.0.0.1:8080`); never a URL with credentials. */
  host: string
  /** The sampling settings the reply was asked with; a reply is reused only under the same ones. */
  settings: { temperature: number; maxTokens: number }
  raw: string
  finishReason: string | null
  usage: { promptTokens: number; completionTokens: number } | null
  receivedAt: string
  /** Seconds of the request that got it (its last try). */
  seconds: number
  /** Tries it took (1 = no retry). */
  tries: number
}

export const StoredReplySchema = z.object({
  version: z.literal(1),
  promptHash: z.string(),
  model: z.string(),
  host: z.string(),
  settings: z.object({ temperature: z.number(), maxTokens: z.number() }),
  raw: z.string(),
  finishReason: z.string().nullable(),
  usage: z.object({ promptTokens: z.number(), completionTokens: z.number() }).nullable(),
  receivedAt: z.string(),
  seconds: z.number(),
  tries: z.number(),
})

/** Where replies live between attempts (the run's store in the pipeline; a Map in tests). */
export interface ReplyStore {
  load(promptHash: string): Promise<StoredReply | undefined>
  save(reply: StoredReply): Promise<void>
}

/** `apiKeyEnv` names a variable that is not set on this worker: no retry can fix it. */
export class AnnotatorConfigError extends Error {
  override name = 'AnnotatorConfigError'
}

/** The endpoint refused the key (401 or 403): every other request would be refused too. */
export class AnnotatorAuthError extends Error {
  override name = 'AnnotatorAuthError'
}

/** The longest single wait a Retry-After header is granted (a larger one is cut to this). */
export const MAX_RETRY_WAIT_SECONDS = 300
/** The longest failure reason kept per trajectory. */
const MAX_REASON_CHARS = 400
/** Keys shorter than this are not secrets worth cutting out of replies (cutting them would mangle text). */
const MIN_REDACTED_KEY_CHARS = 4

export interface OpenAIAnnotatorDeps {
  replies?: ReplyStore
  env?: NodeJS.ProcessEnv
  /** First backoff without Retry-After (doubles per retry, at most 8 s, with jitter); tests shorten it. */
  retryBaseMs?: number
}

/** A function that cuts the key's value out of a text. */
export function redactor(key: string): (text: string) => string {
  if (key.length < MIN_REDACTED_KEY_CHARS) return (text) => text
  return (text) => (text.includes(key) ? text.split(key).join('[redacted]') : text)
}

/** The API key from the named variable of `env`; a clear, non-retryable error (naming the variable) without it. */
export function readApiKey(name: string, env: NodeJS.ProcessEnv = process.env): string {
  const value = env[name]
  if (value === undefined || value === '') {
    throw new AnnotatorConfigError(
      `stage1.annotator.apiKeyEnv names ${name}, which is not set in this worker's environment: ` +
        `set ${name} for the workers that annotate (rollout: annotate; train: stage1); any non-empty value for a server without keys`,
    )
  }
  return value
}

type Outcome =
  | { kind: 'reply'; reply: StoredReply }
  | { kind: 'retry'; reason: string; waitMs?: number }
  | { kind: 'fail'; reason: string }

function bounded(text: string): string {
  return text.length > MAX_REASON_CHARS ? `${text.slice(0, MAX_REASON_CHARS)}… (${text.length} characters)` : text
}

/** Milliseconds a server asked to wait (`retry-after-ms`, or `retry-after` in seconds or as an HTTP date). */
export function retryAfterMs(headers: Headers | undefined, now = Date.now()): number | undefined {
  if (!headers) return undefined
  const ms = Number.parseFloat(headers.get('retry-after-ms') ?? '')
  if (Number.isFinite(ms) && ms >= 0) return ms
  const after = headers.get('retry-after')
  if (after === null) return undefined
  const seconds = Number.parseFloat(after)
  if (Number.isFinite(seconds) && seconds >= 0 && /^\s*[\d.]+\s*$/.test(after)) return seconds * 1000
  const date = Date.parse(after)
  return Number.isFinite(date) ? Math.max(0, date - now) : undefined
}

function backoffMs(retry: number, baseMs: number): number {
  return Math.min(baseMs * 2 ** retry, 8000) * (1 - Math.random() * 0.25)
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export function openaiAnnotator(settings: OpenAIAnnotatorConfig, deps: OpenAIAnnotatorDeps = {}): Annotator {
  const host = new URL(settings.baseUrl).host
  const retryBaseMs = deps.retryBaseMs ?? 500
  const sampling = { temperature: settings.temperature, maxTokens: settings.maxTokens }

  return {
    async annotate(requests, onProgress) {
      const key = readApiKey(settings.apiKeyEnv, deps.env)
      const redact = redactor(key)
      const client = new OpenAI({
        apiKey: key,
        baseURL: settings.baseUrl,
        organization: null,
        project: null,
        maxRetries: 0, // retried below, where each retry is counted and Retry-After is capped
        timeout: Math.max(1, Math.round(settings.timeoutSeconds * 1000)),
        logLevel: 'off',
      })
      const stats: AnnotatorStats = {
        requests: 0,
        retries: 0,
        requestFailures: 0,
        reused: 0,
        promptTokens: 0,
        completionTokens: 0,
      }

      const reusable = (r: StoredReply | undefined, hash: string): r is StoredReply =>
        r !== undefined &&
        r.promptHash === hash &&
        r.model === settings.model &&
        r.settings.temperature === sampling.temperature &&
        r.settings.maxTokens === sampling.maxTokens

      async function once(request: AnnotationRequest, tries: number): Promise<Outcome> {
        const started = performance.now()
        stats.requests++
        try {
          const completion: unknown = await client.chat.completions.create({
            model: settings.model,
            messages: [{ role: 'user', content: request.prompt }],
            temperature: settings.temperature,
            max_tokens: settings.maxTokens,
          })
          const choice = (completion as { choices?: unknown })?.choices
          const first = Array.isArray(choice) ? (choice[0] as Record<string, unknown> | undefined) : undefined
          const message = first?.message as { content?: unknown } | undefined
          if (!first || typeof message !== 'object' || message === null) {
            return { kind: 'retry', reason: 'the reply is not a chat completion (no choices[0].message)' }
          }
          const usage = (completion as { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } }).usage
          const counts =
            usage && typeof usage.prompt_tokens === 'number' && typeof usage.completion_tokens === 'number'
              ? { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens }
              : null
          return {
            kind: 'reply',
            reply: {
              version: 1,
              promptHash: request.promptHash,
              model: settings.model,
              host,
              settings: sampling,
              raw: redact(typeof message.content === 'string' ? message.content : ''),
              finishReason: typeof first.finish_reason === 'string' ? redact(first.finish_reason) : null,
              usage: counts,
              receivedAt: new Date().toISOString(),
              seconds: (performance.now() - started) / 1000,
              tries,
            },
          }
        } catch (error) {
          return classify(error)
        }
      }

      function classify(error: unknown): Outcome {
        if (error instanceof OpenAI.APIConnectionTimeoutError)
          return { kind: 'retry', reason: `timed out after ${settings.timeoutSeconds} s` }
        if (error instanceof OpenAI.APIConnectionError) {
          const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause
          return { kind: 'retry', reason: redact(`connection failed: ${String(cause?.code ?? error.message)}`) }
        }
        if (error instanceof OpenAI.APIError && typeof error.status === 'number') {
          const status = error.status
          const reason = redact(`HTTP ${status}: ${error.message.replace(/^\d{3}\s*/, '') || 'no message'}`)
          if (status === 401 || status === 403) {
            throw new AnnotatorAuthError(
              `${host} refused the API key from ${settings.apiKeyEnv} (HTTP ${status}); check that variable on the workers`,
            )
          }
          if (status === 408 || status === 409 || status === 429 || status >= 500)
            return { kind: 'retry', reason, waitMs: retryAfterMs(error.headers as Headers | undefined) }
          return { kind: 'fail', reason }
        }
        // not an HTTP outcome (a body that is not JSON, for instance): worth another try
        return { kind: 'retry', reason: redact(`request failed: ${(error as Error)?.message ?? String(error)}`) }
      }

      async function answer(request: AnnotationRequest): Promise<AnnotationAnswer> {
        const stored = await deps.replies?.load(request.promptHash)
        if (reusable(stored, request.promptHash)) {
          stats.reused++
          return {
            ok: true,
            raw: stored.raw,
            source: { model: stored.model, host: stored.host, finishReason: stored.finishReason, reused: true },
          }
        }
        for (let retry = 0; ; retry++) {
          const outcome = await once(request, retry + 1)
          if (outcome.kind === 'reply') {
            const { reply } = outcome
            if (reply.usage) {
              stats.promptTokens += reply.usage.promptTokens
              stats.completionTokens += reply.usage.completionTokens
            }
            await deps.replies?.save(reply)
            return {
              ok: true,
              raw: reply.raw,
              source: { model: reply.model, host: reply.host, finishReason: reply.finishReason, reused: false },
            }
          }
          if (outcome.kind === 'fail' || retry >= settings.maxRetries) {
            stats.requestFailures++
            const tries = retry + 1
            return { ok: false, reason: bounded(`${outcome.reason} (${tries} ${tries === 1 ? 'try' : 'tries'})`) }
          }
          stats.retries++
          const asked = outcome.waitMs
          await sleep(
            asked === undefined ? backoffMs(retry, retryBaseMs) : Math.min(asked, MAX_RETRY_WAIT_SECONDS * 1000),
          )
        }
      }

      const answers: AnnotationAnswer[] = new Array(requests.length)
      let next = 0
      let done = 0
      let stop = false
      async function lane(): Promise<void> {
        while (!stop && next < requests.length) {
          const i = next++
          try {
            answers[i] = await answer(requests[i]!)
            onProgress?.(++done, requests.length)
          } catch (error) {
            // a fatal error (a refused key) or a cancelled activity (onProgress heartbeats): the other lanes take
            // no new request
            stop = true
            throw error
          }
        }
      }
      const lanes = Array.from({ length: Math.min(settings.concurrency, requests.length) }, lane)
      const settled = await Promise.allSettled(lanes)
      const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected')
      if (failed) throw failed.reason
      return { answers, stats }
    },
  }
}
