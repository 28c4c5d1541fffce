// The bytes one token stands for, as OpenAI's log-prob `bytes` carry them: decoding a single token loses a
// partial UTF-8 character (it becomes U+FFFD), so byte-level and byte-fallback tokens are read from the vocabulary
// instead, and concatenating a sequence's token bytes gives its text's UTF-8.
import { Tokenizer } from '@huggingface/tokenizers'
import { BYTE_TO_CHAR } from '../policy/bpe-trainer.ts'

const CHAR_TO_BYTE: ReadonlyMap<string, number> = new Map(BYTE_TO_CHAR.map((c, b) => [c, b]))
const BYTE_FALLBACK = /^<0x([0-9A-Fa-f]{2})>$/

interface DecoderJson {
  type?: string
  decoders?: DecoderJson[]
}

function decoderTypes(decoder: DecoderJson | null | undefined): string[] {
  if (!decoder) return []
  return [decoder.type ?? '', ...(decoder.decoders ?? []).flatMap(decoderTypes)]
}

/**
 * `id → bytes` for a tokenizer.json. A `ByteLevel` decoder maps each character of the vocabulary entry back to
 * its byte (GPT-2's table); a `ByteFallback` decoder turns `<0xHH>` entries into that byte; any other token, and
 * added tokens, are the UTF-8 of `text(id)` (its decoding alone).
 */
export function tokenBytesOf(tokenizerJson: object, text: (id: number) => string): (id: number) => number[] {
  const tokenizer = new Tokenizer(tokenizerJson, {})
  const json = tokenizerJson as { decoder?: DecoderJson | null; added_tokens?: { id: number }[] }
  const types = decoderTypes(json.decoder)
  const byteLevel = types.includes('ByteLevel')
  const byteFallback = types.includes('ByteFallback')
  const added = new Set((json.added_tokens ?? []).map((t) => t.id))
  return (id) => {
    const entry = added.has(id) ? undefined : tokenizer.id_to_token(id)
    if (entry !== undefined && byteLevel && [...entry].every((c) => CHAR_TO_BYTE.has(c)))
      return [...entry].map((c) => CHAR_TO_BYTE.get(c) as number)
    const hex = entry !== undefined && byteFallback ? BYTE_FALLBACK.exec(entry)?.[1] : undefined
    if (hex !== undefined) return [Number.parseInt(hex, 16)]
    return [...Buffer.from(text(id), 'utf8')]
  }
}
