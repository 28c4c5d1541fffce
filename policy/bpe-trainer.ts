// Trains a byte-level BPE vocabulary (GPT-2 style) from a text corpus and writes it as a standard
// Hugging Face tokenizer.json. The tokenizer library loads such files but cannot train them.

/** GPT-2's pre-tokenization pattern, the one a `ByteLevel` pre-tokenizer with `use_regex` applies. */
const PRE_TOKENIZE = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu

/** GPT-2's reversible map from bytes to printable characters. */
export const BYTE_TO_CHAR: readonly string[] = (() => {
  const printable: number[] = []
  for (let b = 33; b <= 126; b++) printable.push(b)
  for (let b = 161; b <= 172; b++) printable.push(b)
  for (let b = 174; b <= 255; b++) printable.push(b)
  const table: string[] = new Array(256)
  let extra = 0
  for (let b = 0; b < 256; b++) table[b] = String.fromCodePoint(printable.includes(b) ? b : 256 + extra++)
  return table
})()

export interface BpeTrainOptions {
  /** Total vocabulary, special tokens and the 256 byte symbols included. */
  vocabSize: number
  /** Added first, ids 0..n-1, never split. */
  specialTokens: string[]
  /** Pairs seen fewer times than this are never merged (default 2). */
  minFrequency?: number
}

export interface TokenizerJson {
  version: string
  added_tokens: Array<{ id: number; content: string; special: boolean; [k: string]: unknown }>
  model: { type: 'BPE'; vocab: Record<string, number>; merges: string[]; [k: string]: unknown }
  [k: string]: unknown
}

function byteLevel(text: string): string {
  let out = ''
  for (const b of Buffer.from(text, 'utf8')) out += BYTE_TO_CHAR[b]
  return out
}

interface Word {
  symbols: number[]
  count: number
}

/** Deterministic: the same corpus and options give the same tokenizer.json. */
export function trainByteLevelBpe(corpus: Iterable<string>, options: BpeTrainOptions): TokenizerJson {
  const minFrequency = options.minFrequency ?? 2
  const base = options.specialTokens.length + 256
  if (options.vocabSize < base) {
    throw new RangeError(`vocabSize ${options.vocabSize} is below ${base} (special tokens + 256 byte symbols)`)
  }
  const symbols: string[] = [...options.specialTokens, ...BYTE_TO_CHAR]
  const idOf = new Map(symbols.map((s, i) => [s, i]))
  if (idOf.size !== symbols.length) throw new Error('special tokens collide with byte symbols or each other')

  const counts = new Map<string, number>()
  for (const text of corpus) {
    for (const piece of text.match(PRE_TOKENIZE) ?? []) {
      const mapped = byteLevel(piece)
      counts.set(mapped, (counts.get(mapped) ?? 0) + 1)
    }
  }
  const words: Word[] = [...counts.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([word, count]) => ({ symbols: [...word].map((ch) => idOf.get(ch) as number), count }))

  // pair key = a * 2^20 + b (vocabularies stay below 2^20)
  const SHIFT = 1 << 20
  const pairCount = new Map<number, number>()
  const pairWords = new Map<number, Set<number>>()
  const addPairs = (w: number, sign: 1 | -1) => {
    const { symbols: s, count } = words[w] as Word
    for (let i = 0; i + 1 < s.length; i++) {
      const key = (s[i] as number) * SHIFT + (s[i + 1] as number)
      pairCount.set(key, (pairCount.get(key) ?? 0) + sign * count)
      if (sign > 0) {
        const set = pairWords.get(key)
        if (set) set.add(w)
        else pairWords.set(key, new Set([w]))
      }
    }
  }
  for (let w = 0; w < words.length; w++) addPairs(w, 1)

  const merges: string[] = []
  while (symbols.length < options.vocabSize) {
    let best = -1
    let bestCount = minFrequency - 1
    let bestText = ''
    for (const [key, count] of pairCount) {
      if (count < bestCount || count <= 0) continue
      const text = `${symbols[Math.floor(key / SHIFT)]} ${symbols[key % SHIFT]}`
      if (count > bestCount || text < bestText) {
        best = key
        bestCount = count
        bestText = text
      }
    }
    if (best < 0) break // nothing frequent enough is left
    const a = Math.floor(best / SHIFT)
    const b = best % SHIFT
    const merged = symbols.length
    symbols.push(`${symbols[a]}${symbols[b]}`)
    merges.push(bestText)
    for (const w of pairWords.get(best) ?? []) {
      const word = words[w] as Word
      addPairs(w, -1)
      const next: number[] = []
      for (let i = 0; i < word.symbols.length; i++) {
        if (word.symbols[i] === a && word.symbols[i + 1] === b) {
          next.push(merged)
          i++
        } else next.push(word.symbols[i] as number)
      }
      word.symbols = next
      addPairs(w, 1)
    }
    pairCount.delete(best)
    pairWords.delete(best)
  }

  const byteLevelStep = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: options.specialTokens.map((content, id) => ({
      id,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer: byteLevelStep,
    post_processor: { ...byteLevelStep, trim_offsets: false },
    decoder: byteLevelStep,
    model: bpeModelJson(Object.fromEntries(symbols.map((s, i) => [s, i])), merges),
  }
}

/** The `model` entry of a byte-level BPE tokenizer.json: vocabulary and merges, no unknown token, no dropout. */
export function bpeModelJson(vocab: Record<string, number>, merges: string[]) {
  return {
    type: 'BPE' as const,
    dropout: null,
    unk_token: null,
    continuing_subword_prefix: null,
    end_of_word_suffix: null,
    fuse_unk: false,
    byte_fallback: false,
    ignore_merges: false,
    vocab,
    merges,
  }
}
