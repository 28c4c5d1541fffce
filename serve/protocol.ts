// Request bodies of the OpenAI-compatible endpoints, validated with zod. Fields the server does not know are
// ignored (clients send their own extras); sampling fields it knows but does not implement are refused by name
// unless they hold the value that changes nothing (clients such as LangChain send `frequency_penalty: 0`).
import { z } from 'zod'
import { badRequest } from './errors.ts'

const stop = z.union([z.string(), z.array(z.string()).max(16)]).nullish()

/** A field seedflow does not implement: accepted only with a value that leaves sampling as it is. */
function unsupported<T extends z.ZodType>(value: T, neutral: (v: z.infer<T>) => boolean, says: string) {
  return value
    .refine(neutral, `not supported by seedflow serve (only ${says} is accepted: it changes nothing)`)
    .nullish()
}

/** Sampling fields of OpenAI and vLLM that this server does not implement (docs/operations.md §15). */
const UNSUPPORTED = {
  top_k: unsupported(z.number(), (v) => v === -1 || v === 0, '-1 or 0'),
  min_p: unsupported(z.number(), (v) => v === 0, '0'),
  min_tokens: unsupported(z.number(), (v) => v === 0, '0'),
  repetition_penalty: unsupported(z.number(), (v) => v === 1, '1'),
  frequency_penalty: unsupported(z.number(), (v) => v === 0, '0'),
  presence_penalty: unsupported(z.number(), (v) => v === 0, '0'),
  logit_bias: unsupported(z.record(z.string(), z.number()), (v) => Object.keys(v).length === 0, '{}'),
  response_format: unsupported(
    z.object({ type: z.string() }).passthrough(),
    (v) => v.type === 'text',
    '{"type": "text"}',
  ),
}

const common = {
  ...UNSUPPORTED,
  model: z.string().min(1),
  max_tokens: z.number().int().positive().nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  n: z.number().int().positive().nullish(),
  stop,
  seed: z.number().int().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  /** vLLM's flag: answer with `prompt_token_ids` and each choice's `token_ids`, so that nothing is re-tokenized. */
  return_token_ids: z.boolean().nullish(),
  /** vLLM's flag: keep sampling past end-of-sequence tokens, up to max_tokens (benchmarks). */
  ignore_eos: z.boolean().nullish(),
}

const tokenIds = z.array(z.number().int().nonnegative()).min(1)

const textPart = z.object({ type: z.literal('text'), text: z.string() })

export const ChatRequestSchema = z.object({
  ...common,
  messages: z
    .array(
      z.object({
        role: z.enum(['system', 'developer', 'user', 'assistant']),
        content: z.union([z.string(), z.array(textPart)]),
      }),
    )
    .min(1),
  max_completion_tokens: z.number().int().positive().nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  tools: z.array(z.unknown()).max(0, 'tools are not supported').nullish(),
})

export const CompletionRequestSchema = z.object({
  ...common,
  /** A text, token ids, or a list of either: each prompt gets its own n choices, as OpenAI's do. */
  prompt: z.union([z.string(), z.array(z.string()).min(1), tokenIds, z.array(tokenIds).min(1)]),
  logprobs: z.number().int().min(0).max(20).nullish(),
  echo: z.literal(false, 'echo is not supported').nullish(),
  best_of: z.literal(1, 'best_of is not supported (use n)').nullish(),
  suffix: z.null('suffix is not supported').optional(),
})

export type ChatRequest = z.infer<typeof ChatRequestSchema>
export type CompletionRequest = z.infer<typeof CompletionRequestSchema>

/** Parses a body or throws a 400 that names the first bad field. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const result = schema.safeParse(body)
  if (result.success) return result.data
  const issue = result.error.issues[0]
  const param = issue && issue.path.length > 0 ? issue.path.join('.') : null
  throw badRequest(`${param ? `${param}: ` : ''}${issue?.message ?? 'invalid request'}`, param)
}
