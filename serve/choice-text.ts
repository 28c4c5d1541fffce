// The text of one choice as its tokens arrive, decoded incrementally: only the tokens since the last complete
// character are decoded again (the difference of two decodings, so tokenizers whose decoders treat the first
// token specially stay right), and a trailing incomplete character waits for its next bytes. The text is cut
// before the first stop string, and released only once it can no longer change: a possible start of a stop
// string is held back.

const INCOMPLETE = '\uFFFD'

export class ChoiceText {
  readonly #decode: (ids: readonly number[]) => string
  readonly #stops: readonly string[]
  readonly tokens: number[] = []
  /** Decoded text up to the last complete character. */
  #decoded = ''
  /** Tokens [prefix, read) decode to the tail of `#decoded`; tokens from `read` on are not decoded yet. */
  #prefix = 0
  #read = 0
  /** Text handed out so far. */
  emitted = ''
  stopped = false

  constructor(decode: (ids: readonly number[]) => string, stops: readonly string[] = []) {
    this.#decode = decode
    this.#stops = stops.filter((s) => s.length > 0)
  }

  /** Adds a token; returns the text that became final (may be empty). After a stop string, `stopped` is set. */
  push(token: number): string {
    this.tokens.push(token)
    const before = this.#decode(this.tokens.slice(this.#prefix, this.#read))
    const now = this.#decode(this.tokens.slice(this.#prefix))
    if (now.length > before.length && !now.endsWith(INCOMPLETE)) {
      this.#decoded += now.slice(before.length)
      this.#prefix = this.#read
      this.#read = this.tokens.length
    }
    const text = this.#decoded
    const at = firstStop(text, this.#stops)
    if (at >= 0) {
      this.stopped = true
      return this.#advance(text.slice(0, at))
    }
    return this.#advance(text.slice(0, text.length - heldForStop(text, this.#stops)))
  }

  /** The sequence ended without a stop string: everything not yet handed out, incomplete characters too. */
  flush(): string {
    if (this.stopped) return ''
    const before = this.#decode(this.tokens.slice(this.#prefix, this.#read))
    const now = this.#decode(this.tokens.slice(this.#prefix))
    return this.#advance(this.#decoded + now.slice(before.length))
  }

  #advance(final: string): string {
    if (final.length <= this.emitted.length || !final.startsWith(this.emitted)) return ''
    const delta = final.slice(this.emitted.length)
    this.emitted = final
    return delta
  }
}

/** Where the earliest stop string starts in `text`, or -1. */
export function firstStop(text: string, stops: readonly string[]): number {
  let first = -1
  for (const stop of stops) {
    const at = text.indexOf(stop)
    if (at >= 0 && (first < 0 || at < first)) first = at
  }
  return first
}

/** The longest suffix of `text` that is a proper prefix of a stop string (it may still become one). */
function heldForStop(text: string, stops: readonly string[]): number {
  let held = 0
  for (const stop of stops)
    for (let k = Math.min(stop.length - 1, text.length); k > held; k--)
      if (text.endsWith(stop.slice(0, k))) {
        held = k
        break
      }
  return held
}
