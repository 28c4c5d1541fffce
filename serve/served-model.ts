// The served model: the plain policy (no analyzer, no skills) with its tokenizer, chat template and end tokens.
import { checkpointCodec } from '../compute/policy.ts'
import { type ChatMessage, type ChatTemplate, chatTemplateOf } from '../policy/chat-template.ts'
import type { Checkpoint } from '../policy/checkpoint.ts'
import { TextTokenizer } from '../policy/tokenizer.ts'
import { tokenBytesOf } from './token-bytes.ts'

export interface ServedModel {
  /** The name clients put in `model`. */
  id: string
  /** Unix seconds, for /v1/models. */
  created: number
  vocabSize: number
  /** Ids that end a sequence: the tokenizer's end of sequence and the chat template's end of turn. */
  eosIds: readonly number[]
  encode(text: string): number[]
  /** Response text (special tokens dropped). */
  decode(ids: readonly number[]): string
  /** One token as text (special tokens kept), for log-prob entries. */
  tokenText(id: number): string
  /** The bytes one token stands for (a byte-level token's real bytes, not those of U+FFFD). */
  tokenBytes(id: number): number[]
  /** Undefined when the checkpoint has no chat template (then /v1/chat/completions answers 400). */
  chatPrompt: ((messages: readonly ChatMessage[]) => string) | undefined
}

export function servedModel(checkpoint: Checkpoint, id: string): ServedModel {
  if (!checkpoint.tokenizerJson) throw new Error(`checkpoint ${id} has no tokenizer.json: it cannot be served`)
  const tokenizer = new TextTokenizer(checkpoint.tokenizerJson, checkpoint.tokenizerConfig ?? {}, checkpoint.eosIds)
  const template: ChatTemplate | undefined = chatTemplateOf(checkpoint.tokenizerConfig)
  const codec = checkpointCodec(checkpoint)
  const tokenText = (token: number) => tokenizer.decode([token])
  return {
    id,
    created: Math.floor(Date.now() / 1000),
    vocabSize: checkpoint.config.vocabSize,
    eosIds: codec.eosIds,
    encode: (text) => tokenizer.encode(text),
    decode: (ids) => tokenizer.decode(ids, { skipSpecial: true }),
    tokenText,
    tokenBytes: tokenBytesOf(checkpoint.tokenizerJson, tokenText),
    chatPrompt: template ? (messages) => template.render(messages, { addGenerationPrompt: true }) : undefined,
  }
}
