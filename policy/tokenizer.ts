import { Tokenizer } from '@huggingface/tokenizers'

/** Special tokens of the built-in tiny model's vocabulary (ids 0, 1, 2). */
export const TINY_SPECIAL_TOKENS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] as const

export class TokenizerError extends Error {
  override name = 'TokenizerError'
}

/** A tokenizer.json (any Hugging Face tokenizer) behind the few calls the policy needs. */
export class TextTokenizer {
  readonly #tokenizer: Tokenizer
  /** Ids that end a generation (from generation_config.json, or the config's eos token). */
  readonly eosIds: readonly number[]
  readonly padId: number
  readonly vocabSize: number

  constructor(tokenizerJson: object, tokenizerConfig: object = {}, eosIds?: readonly number[]) {
    this.#tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig)
    this.vocabSize = this.#tokenizer.get_vocab(true).size
    const config = tokenizerConfig as {
      eos_token?: string | { content: string }
      pad_token?: string | { content: string } | null
    }
    const eosToken = typeof config.eos_token === 'object' ? config.eos_token?.content : config.eos_token
    const fallbackEos = this.tokenId(eosToken ?? TINY_SPECIAL_TOKENS[0])
    this.eosIds = eosIds && eosIds.length > 0 ? [...eosIds] : fallbackEos === undefined ? [] : [fallbackEos]
    if (this.eosIds.length === 0) throw new TokenizerError('no end-of-sequence token: give eos ids or an eos_token')
    const padToken = typeof config.pad_token === 'object' ? config.pad_token?.content : config.pad_token
    this.padId = (padToken ? this.tokenId(padToken) : undefined) ?? (this.eosIds[0] as number)
  }

  /** The last text encoded and its ids: fitting a prompt counts its tokens, then asks for the same text's ids. */
  #last: { text: string; ids: number[] } | null = null

  encode(text: string): number[] {
    if (this.#last?.text !== text)
      this.#last = { text, ids: this.#tokenizer.encode(text, { add_special_tokens: false }).ids }
    return this.#last.ids.slice()
  }

  decode(ids: readonly number[], options: { skipSpecial?: boolean } = {}): string {
    if (ids.length === 0) return '' // the library refuses an empty list
    return this.#tokenizer.decode([...ids], { skip_special_tokens: options.skipSpecial ?? false })
  }

  tokenId(token: string): number | undefined {
    return this.#tokenizer.token_to_id(token)
  }
}
