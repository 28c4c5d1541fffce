// /v1/chat/completions and /v1/completions: a validated body becomes a prompt and sampling parameters, and the
// generation's deltas become OpenAI's response objects or stream chunks (plus vLLM's token ids on request).
import { randomUUID } from 'node:crypto'
import type { ChatMessage } from '../policy/chat-template.ts'
import { badRequest } from './errors.ts'
import type { ChoiceDelta, SamplingParams, TokenLogprob } from './generation.ts'
import { samplingParams } from './generation.ts'
import {
  type ChatRequest,
  ChatRequestSchema,
  type CompletionRequest,
  CompletionRequestSchema,
  parseBody,
} from './protocol.ts'
import type { ServedModel } from './served-model.ts'

/** Each of `n` choices as one delta: its text, tokens and log-probs joined, its finish reason (length if none). */
function mergedChoices(deltas: readonly ChoiceDelta[], n: number): Array<ChoiceDelta & { finish: 'stop' | 'length' }> {
  return Array.from({ length: n }, (_, index) => {
    const all = {
      index,
      text: '',
      tokens: [] as number[],
      logprobs: [] as TokenLogprob[],
      finish: 'length' as 'stop' | 'length',
    }
    for (const d of deltas) {
      if (d.index !== index) continue
      all.text += d.text
      all.tokens.push(...d.tokens)
      all.logprobs.push(...d.logprobs)
      if (d.finish) all.finish = d.finish
    }
    return all
  })
}

export interface Limits {
  context: number
  rows: number
}

/** How one endpoint turns a request into a prompt and formats what the generation hands back. */
export interface Endpoint {
  /** One prompt (chat), or each prompt of a completions request; each gets `params.n` choices. */
  prompts: number[][]
  params: SamplingParams
  stream: boolean
  includeUsage: boolean
  /** The chunks that open a stream (chat: each choice's role). */
  opening(): object[]
  chunk(delta: ChoiceDelta): object
  usageChunk(completionTokens: number): object
  /** The whole response from every choice's deltas, in order. */
  response(deltas: ChoiceDelta[], completionTokens: number): object
}

function checkModel(model: ServedModel, name: string): void {
  if (name !== model.id) throw new UnknownModel(name, model.id)
}

export class UnknownModel extends Error {
  override name = 'UnknownModel'
  constructor(
    readonly requested: string,
    readonly served: string,
  ) {
    super(`the model ${JSON.stringify(requested)} does not exist; this server serves ${JSON.stringify(served)}`)
  }
}

function usage(prompt: number, completion: number) {
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
}

/** OpenAI's and vLLM's default max_tokens on /v1/completions (chat's is all the room the context leaves). */
export const COMPLETIONS_DEFAULT_MAX_TOKENS = 16

function chatLogprobs(model: ServedModel, entries: TokenLogprob[]) {
  const entry = (token: number, logprob: number) => ({
    token: model.tokenText(token),
    logprob,
    bytes: model.tokenBytes(token),
  })
  return {
    content: entries.map((e) => ({
      ...entry(e.token, e.logprob),
      top_logprobs: e.top.map((t) => entry(t.token, t.logprob)),
    })),
  }
}

function completionLogprobs(model: ServedModel, entries: TokenLogprob[], offset: number) {
  const tokens = entries.map((e) => model.tokenText(e.token))
  const text_offset: number[] = []
  let at = offset
  for (const t of tokens) {
    text_offset.push(at)
    at += t.length
  }
  return {
    tokens,
    token_logprobs: entries.map((e) => e.logprob),
    top_logprobs: entries.map((e) => Object.fromEntries(e.top.map((t) => [model.tokenText(t.token), t.logprob]))),
    text_offset,
  }
}

function messageText(content: ChatRequest['messages'][number]['content']): string {
  return typeof content === 'string' ? content : content.map((p) => p.text).join('')
}

export function chatEndpoint(model: ServedModel, body: unknown, limits: Limits): Endpoint {
  const req: ChatRequest = parseBody(ChatRequestSchema, body)
  checkModel(model, req.model)
  if (!model.chatPrompt)
    throw badRequest(
      `the model ${model.id} has no chat template (tokenizer_config.json chat_template): use /v1/completions`,
      'messages',
      'no_chat_template',
    )
  if (req.top_logprobs && !req.logprobs) throw badRequest('top_logprobs needs logprobs: true', 'top_logprobs')
  const messages: ChatMessage[] = req.messages.map((m) => ({
    role: m.role === 'developer' ? 'system' : m.role,
    content: messageText(m.content),
  }))
  const prompt = model.encode(model.chatPrompt(messages))
  const params = samplingParams(
    { ...req, max_tokens: req.max_completion_tokens ?? req.max_tokens },
    { longest: prompt.length, count: 1, param: 'messages' },
    limits,
    req.logprobs ? (req.top_logprobs ?? 0) : undefined,
  )
  const id = `chatcmpl-${randomUUID()}`
  const created = Math.floor(Date.now() / 1000)
  const ids = req.return_token_ids === true
  const head = { id, created, model: model.id }
  const logprobsOf = (d: ChoiceDelta) => (params.topLogprobs === undefined ? null : chatLogprobs(model, d.logprobs))
  return {
    prompts: [prompt],
    params,
    stream: req.stream === true,
    includeUsage: req.stream_options?.include_usage === true,
    opening: () =>
      Array.from({ length: params.n }, (_, index) => ({
        ...head,
        object: 'chat.completion.chunk',
        ...(ids && index === 0 ? { prompt_token_ids: prompt } : {}),
        choices: [{ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
      })),
    chunk(d) {
      return {
        ...head,
        object: 'chat.completion.chunk',
        choices: [
          {
            index: d.index,
            delta: d.text.length > 0 ? { content: d.text } : {},
            logprobs: logprobsOf(d),
            finish_reason: d.finish,
            ...(ids ? { token_ids: d.tokens } : {}),
          },
        ],
      }
    },
    usageChunk: (completion) => ({
      ...head,
      object: 'chat.completion.chunk',
      choices: [],
      usage: usage(prompt.length, completion),
    }),
    response(deltas, completion) {
      const choices = mergedChoices(deltas, params.n).map((all) => ({
        index: all.index,
        message: { role: 'assistant', content: all.text },
        logprobs: logprobsOf(all),
        finish_reason: all.finish,
        ...(ids ? { token_ids: all.tokens } : {}),
      }))
      return {
        ...head,
        object: 'chat.completion',
        choices,
        usage: usage(prompt.length, completion),
        ...(ids ? { prompt_token_ids: prompt } : {}),
      }
    },
  }
}

export function completionEndpoint(model: ServedModel, body: unknown, limits: Limits): Endpoint {
  const req: CompletionRequest = parseBody(CompletionRequestSchema, body)
  checkModel(model, req.model)
  const prompts = completionPrompts(model, req.prompt)
  const params = samplingParams(
    req,
    {
      longest: Math.max(...prompts.map((p) => p.length)),
      count: prompts.length,
      param: 'prompt',
      defaultMaxTokens: COMPLETIONS_DEFAULT_MAX_TOKENS,
    },
    limits,
    req.logprobs ?? undefined,
  )
  const promptTokens = prompts.reduce((sum, p) => sum + p.length, 0)
  // vLLM's token ids answer in the request's shape: one prompt's ids, or a list of each prompt's
  const promptIds = isPromptList(req.prompt) ? prompts : prompts[0]
  const id = `cmpl-${randomUUID()}`
  const created = Math.floor(Date.now() / 1000)
  const ids = req.return_token_ids === true
  const head = { id, created, model: model.id, object: 'text_completion' }
  const offsets = new Map<number, number>()
  let first = true
  const logprobsOf = (d: ChoiceDelta, offset: number) =>
    params.topLogprobs === undefined ? null : completionLogprobs(model, d.logprobs, offset)
  return {
    prompts,
    params,
    stream: req.stream === true,
    includeUsage: req.stream_options?.include_usage === true,
    opening: () => [],
    chunk(d) {
      const offset = offsets.get(d.index) ?? 0
      offsets.set(d.index, offset + d.logprobs.reduce((n, e) => n + model.tokenText(e.token).length, 0))
      const withPrompt = ids && first
      first = false
      return {
        ...head,
        ...(withPrompt ? { prompt_token_ids: promptIds } : {}),
        choices: [
          {
            index: d.index,
            text: d.text,
            logprobs: logprobsOf(d, offset),
            finish_reason: d.finish,
            ...(ids ? { token_ids: d.tokens } : {}),
          },
        ],
      }
    },
    usageChunk: (completion) => ({ ...head, choices: [], usage: usage(promptTokens, completion) }),
    response(deltas, completion) {
      const choices = mergedChoices(deltas, params.n * prompts.length).map((all) => ({
        index: all.index,
        text: all.text,
        logprobs: logprobsOf(all, 0),
        finish_reason: all.finish,
        ...(ids ? { token_ids: all.tokens } : {}),
      }))
      return {
        ...head,
        choices,
        usage: usage(promptTokens, completion),
        ...(ids ? { prompt_token_ids: promptIds } : {}),
      }
    },
  }
}

function isPromptList(prompt: CompletionRequest['prompt']): prompt is string[] | number[][] {
  return Array.isArray(prompt) && (typeof prompt[0] === 'string' || Array.isArray(prompt[0]))
}

/** The request's prompts as token ids: a text, token ids, or a list of either (`prompt.<i>` names a bad one). */
function completionPrompts(model: ServedModel, prompt: CompletionRequest['prompt']): number[][] {
  const list: readonly (string | number[])[] = isPromptList(prompt) ? prompt : [prompt as string | number[]]
  return list.map((one, i) => {
    const param = isPromptList(prompt) ? `prompt.${i}` : 'prompt'
    if (typeof one === 'string') {
      const ids = model.encode(one)
      if (ids.length === 0) throw badRequest(`${param}: the prompt is empty`, param)
      return ids
    }
    const bad = one.find((t) => t >= model.vocabSize)
    if (bad !== undefined)
      throw badRequest(`${param}: token id ${bad} is outside the vocabulary (0..${model.vocabSize - 1})`, param)
    return one
  })
}
