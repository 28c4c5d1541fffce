// The tokenizer of a GGUF file as a Hugging Face tokenizer.json (+ tokenizer_config.json): llama.cpp stores the
// vocabulary, merges, token types and special ids as metadata, and names its pre-tokenizer (`tokenizer.ggml.pre`).
// Byte-level BPE (`gpt2`) only; a SentencePiece or other model, or a pre-tokenizer not listed here, is refused by
// name rather than tokenized differently from the model's training.
import { bpeModelJson } from '../bpe-trainer.ts'
import { GgufError } from './gguf-error.ts'

/** llama.cpp token types (llama_token_type). */
const CONTROL = 3
const USER_DEFINED = 4

const byteLevel = (useRegex: boolean) => ({
  type: 'ByteLevel',
  add_prefix_space: false,
  trim_offsets: true,
  use_regex: useRegex,
})

/**
 * Pre-tokenizers by llama.cpp's name. `smollm` is SmolLM's own tokenizer.json: every digit alone, then GPT-2's
 * split (transformers' GGUF conversion lacks it and falls back to GPT-2's split alone).
 */
const PRE_TOKENIZERS: Record<string, object> = {
  default: byteLevel(true),
  gpt2: byteLevel(true),
  smollm: { type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: true }, byteLevel(true)] },
}

/** GPT-2's printable spelling of bytes: printable Latin-1 bytes stand for themselves, the rest for 256 + n. */
function byteSpelling(): string[] {
  const spelling: string[] = []
  let next = 256
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174
    spelling.push(String.fromCodePoint(printable ? b : next++))
  }
  return spelling
}
const SPELLING = byteSpelling()
const ALPHABET = new Set(SPELLING)

/** A token as the byte-level vocabulary spells it (llama.cpp sometimes stores special tokens as plain text). */
function spelled(token: string): string {
  if ([...token].every((ch) => ALPHABET.has(ch))) return token
  return [...Buffer.from(token, 'utf8')].map((b) => SPELLING[b]).join('')
}

export interface GgufTokenizer {
  tokenizerJson: object
  tokenizerConfig: Record<string, unknown>
  eosIds: number[]
  bosId?: number
}

function strings(metadata: Record<string, unknown>, key: string, source: string): string[] {
  const value = metadata[key]
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string'))
    throw new GgufError(`${source}: metadata ${key} is missing or not a list of strings`)
  return value as string[]
}

export function ggufTokenizer(metadata: Record<string, unknown>, source: string): GgufTokenizer {
  const model = metadata['tokenizer.ggml.model']
  if (model !== 'gpt2')
    throw new GgufError(
      `${source}: tokenizer model ${JSON.stringify(model)} is not supported (seedflow reads gpt2, byte-level BPE)`,
    )
  const preName = (metadata['tokenizer.ggml.pre'] as string | undefined) ?? 'default'
  const preTokenizer = PRE_TOKENIZERS[preName]
  if (!preTokenizer)
    throw new GgufError(
      `${source}: pre-tokenizer ${JSON.stringify(preName)} is not supported (seedflow knows ${Object.keys(PRE_TOKENIZERS).join(', ')})`,
    )
  const tokens = strings(metadata, 'tokenizer.ggml.tokens', source)
  const merges = strings(metadata, 'tokenizer.ggml.merges', source)
  const types = (metadata['tokenizer.ggml.token_type'] as number[] | undefined) ?? []
  const vocab: Record<string, number> = {}
  tokens.forEach((token, id) => {
    vocab[spelled(token)] = id
  })
  const added = tokens.flatMap((content, id) => {
    const type = types[id]
    // a control token outside the byte alphabet is a mislabel (it would not be a vocabulary entry as spelled)
    const special = type === CONTROL && spelled(content) === content
    if (!special && type !== USER_DEFINED) return []
    return [{ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special }]
  })
  const tokenizerJson = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: preTokenizer,
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: bpeModelJson(vocab, merges),
  }
  const id = (key: string): number | undefined => {
    const value = metadata[`tokenizer.ggml.${key}`]
    if (value === undefined) return undefined
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value >= tokens.length)
      throw new GgufError(`${source}: metadata tokenizer.ggml.${key} ${String(value)} is not a token id`)
    return value
  }
  const eos = id('eos_token_id')
  if (eos === undefined) throw new GgufError(`${source}: metadata tokenizer.ggml.eos_token_id is missing`)
  const eot = id('eot_token_id')
  const bos = id('bos_token_id')
  const tokenizerConfig: Record<string, unknown> = {
    tokenizer_class: 'GPT2Tokenizer',
    add_bos_token: metadata['tokenizer.ggml.add_bos_token'] === true,
    add_eos_token: metadata['tokenizer.ggml.add_eos_token'] === true,
    clean_up_tokenization_spaces: false,
    model_max_length: metadata[`${metadata['general.architecture']}.context_length`] ?? null,
  }
  for (const [name, key] of [
    ['bos_token', 'bos_token_id'],
    ['eos_token', 'eos_token_id'],
    ['unk_token', 'unknown_token_id'],
    ['pad_token', 'padding_token_id'],
  ] as const) {
    const tokenId = id(key)
    if (tokenId !== undefined) tokenizerConfig[name] = tokens[tokenId]
  }
  const template = metadata['tokenizer.chat_template']
  if (typeof template === 'string') tokenizerConfig.chat_template = template
  const result: GgufTokenizer = {
    tokenizerJson,
    tokenizerConfig,
    eosIds: eot !== undefined && eot !== eos ? [eos, eot] : [eos],
  }
  if (bos !== undefined) result.bosId = bos
  return result
}
