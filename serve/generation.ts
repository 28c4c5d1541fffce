// One request's generation, endpoint-neutral: its sampling parameters checked against the batch's limits, one
// sequence job per choice, and each choice's text, token ids and log-probs as they arrive. The endpoints
// (chat, completions) format what this hands them, streamed or whole.
import { randomInt } from 'node:crypto'
import { mixSeed, mulberry32 } from '../envs/rng.ts'
import type { SampledToken } from '../policy/decode-batch.ts'
import { ChoiceText } from './choice-text.ts'
import { badRequest } from './errors.ts'
import type { SequenceJob } from './scheduler.ts'
import type { ServedModel } from './served-model.ts'

export interface SamplingParams {
  n: number
  maxTokens: number
  /** 0 = greedy. */
  temperature: number
  topP: number
  seed: number
  stops: string[]
  /** undefined: no log-probs; 0: the sampled token's only; k: also the k most likely. */
  topLogprobs: number | undefined
  ignoreEos: boolean
}

export interface RawParams {
  n?: number | null | undefined
  max_tokens?: number | null | undefined
  temperature?: number | null | undefined
  top_p?: number | null | undefined
  seed?: number | null | undefined
  stop?: string | string[] | null | undefined
  ignore_eos?: boolean | null | undefined
}

export interface PromptShape {
  /** Tokens of the longest prompt (every prompt's choices must fit the context). */
  longest: number
  /** Prompts in the request; each gets n choices. */
  count: number
  /** The field a too-long prompt is blamed on: `messages` (chat) or `prompt` (completions). */
  param: 'messages' | 'prompt'
  /** max_tokens when the request gives none (bounded by the room the prompt leaves); default all that room. */
  defaultMaxTokens?: number
}

/** The request's sampling, with max_tokens defaulted and bounded by the cache: prompt + max_tokens ≤ context. */
export function samplingParams(
  raw: RawParams,
  prompts: PromptShape,
  limits: { context: number; rows: number },
  topLogprobs: number | undefined,
): SamplingParams {
  const promptTokens = prompts.longest
  const room = limits.context - promptTokens
  if (room < 1)
    throw badRequest(
      `the ${prompts.count > 1 ? 'longest prompt' : 'prompt'} has ${promptTokens} tokens; the context is ${limits.context} tokens ` +
        '(prompt + max_tokens ≤ context), so at most ' +
        `${limits.context - 1} prompt tokens fit`,
      prompts.param,
      'context_length_exceeded',
    )
  const maxTokens = raw.max_tokens ?? Math.min(prompts.defaultMaxTokens ?? room, room)
  if (promptTokens + maxTokens > limits.context)
    throw badRequest(
      `prompt of ${promptTokens} tokens + max_tokens ${maxTokens} exceed the context of ` +
        `${limits.context} tokens (prompt + max_tokens ≤ context; at most ${room} new tokens for this prompt)`,
      'max_tokens',
      'context_length_exceeded',
    )
  const n = raw.n ?? 1
  if (n > limits.rows)
    throw badRequest(`n = ${n} exceeds the ${limits.rows} rows of the decode batch (--batch-rows)`, 'n')
  if (n * prompts.count > limits.rows)
    throw badRequest(
      `${prompts.count} prompts × n = ${n} make ${n * prompts.count} choices, over the ${limits.rows} rows ` +
        'of the decode batch (--batch-rows): send fewer prompts per request',
      'prompt',
    )
  const stops = raw.stop === undefined || raw.stop === null ? [] : typeof raw.stop === 'string' ? [raw.stop] : raw.stop
  return {
    n,
    maxTokens,
    temperature: raw.temperature ?? 1,
    topP: raw.top_p ?? 1,
    seed: raw.seed ?? randomInt(2 ** 32),
    stops,
    topLogprobs,
    ignoreEos: raw.ignore_eos === true,
  }
}

export interface TokenLogprob {
  token: number
  logprob: number
  top: { token: number; logprob: number }[]
}

/** What a choice gained since its last delivery: final text, the tokens sampled, their log-probs. */
export interface ChoiceDelta {
  index: number
  text: string
  tokens: number[]
  logprobs: TokenLogprob[]
  /** Set on the choice's last delta. */
  finish: 'stop' | 'length' | null
}

export interface GenerationSink {
  /** A choice has new text, or ended (then `finish` is set; it may carry text and tokens too). */
  delta(delta: ChoiceDelta): void
  /** Every choice ended. */
  done(): void
}

interface ChoiceState {
  text: ChoiceText
  pendingTokens: number[]
  pendingLogprobs: TokenLogprob[]
  finish: 'stop' | 'length' | null
}

/**
 * The n jobs of each prompt, reporting to `sink`; `completionTokens()` counts what they sampled. Prompt p's
 * choices have indexes p·n … p·n + n − 1 (OpenAI's order), each its own random stream.
 */
export function generationJobs(
  model: ServedModel,
  prompts: readonly number[][],
  params: SamplingParams,
  sink: GenerationSink,
): { jobs: SequenceJob[]; completionTokens(): number } {
  const greedy = params.temperature === 0
  const choices: ChoiceState[] = []
  const total = prompts.length * params.n
  let open = total
  let completion = 0
  const jobs = Array.from({ length: total }, (_, index): SequenceJob => {
    const prompt = prompts[Math.floor(index / params.n)] as number[]
    const state: ChoiceState = {
      text: new ChoiceText(model.decode, params.stops),
      pendingTokens: [],
      pendingLogprobs: [],
      finish: null,
    }
    choices.push(state)
    const flush = (finish: 'stop' | 'length' | null, text: string) => {
      const delta: ChoiceDelta = {
        index,
        text,
        tokens: state.pendingTokens.splice(0),
        logprobs: state.pendingLogprobs.splice(0),
        finish,
      }
      sink.delta(delta)
    }
    return {
      spec: {
        prompt,
        temperature: greedy ? 1 : params.temperature,
        greedy,
        topP: params.topP,
        ...(params.topLogprobs ? { topLogprobs: params.topLogprobs } : {}),
        rng: mulberry32(mixSeed(params.seed, index)),
      },
      maxTokens: params.maxTokens,
      onToken(t: SampledToken): boolean {
        completion++
        state.pendingTokens.push(t.token)
        if (params.topLogprobs !== undefined)
          state.pendingLogprobs.push({ token: t.token, logprob: t.logprob, top: t.top ?? [] })
        const end = !params.ignoreEos && model.eosIds.includes(t.token)
        const text = end ? '' : state.text.push(t.token)
        if (end || state.text.stopped) return true
        if (text.length > 0) flush(null, text)
        return false
      },
      onEnd(reason) {
        state.finish = reason
        flush(reason, state.text.flush())
        if (--open === 0) sink.done()
      },
    }
  })
  return { jobs, completionTokens: () => completion }
}
