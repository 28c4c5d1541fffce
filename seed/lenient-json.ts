// A forgiving reader for JSON objects embedded in model output: single- or double-quoted strings with raw
// control characters, trailing commas, and Python literals (True/False/None). It covers what the released
// analyzer parser accepts (strict=False JSON, trailing-comma repair, a Python-literal fallback) in one pass.
// It never throws: every failure is a value.

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue }

export type ReadResult = { ok: true; value: JsonValue; end: number } | { ok: false; reason: string; at: number }

/** Deeper nesting than this is refused rather than risking the call stack on adversarial input. */
export const MAX_DEPTH = 64

const LITERALS: ReadonlyArray<readonly [string, JsonValue]> = [
  ['true', true],
  ['false', false],
  ['null', null],
  ['True', true],
  ['False', false],
  ['None', null],
]

const SIMPLE_ESCAPES: Record<string, string> = {
  '"': '"',
  "'": "'",
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
}

class Failure {
  constructor(
    readonly reason: string,
    readonly at: number,
  ) {}
}

/** Reads one value starting at `start` (leading whitespace allowed); `end` is the index just after it. */
export function readValue(text: string, start: number): ReadResult {
  const reader = new Reader(text)
  try {
    const value = reader.value(start, 0)
    return { ok: true, value: value.value, end: value.end }
  } catch (error) {
    if (error instanceof Failure) return { ok: false, reason: error.reason, at: error.at }
    throw error
  }
}

interface Read {
  value: JsonValue
  end: number
}

class Reader {
  constructor(private readonly text: string) {}

  value(at: number, depth: number): Read {
    const i = this.skip(at)
    const c = this.text[i]
    if (c === undefined) throw new Failure('unexpected end of text', i)
    if (c === '{') return this.object(i, depth + 1)
    if (c === '[') return this.array(i, depth + 1)
    if (c === '"' || c === "'") return this.string(i)
    if (c === '-' || c === '+' || (c >= '0' && c <= '9') || c === '.') return this.number(i)
    for (const [word, value] of LITERALS) {
      if (this.text.startsWith(word, i)) return { value, end: i + word.length }
    }
    throw new Failure(`unexpected character ${JSON.stringify(c)}`, i)
  }

  private object(open: number, depth: number): Read {
    if (depth > MAX_DEPTH) throw new Failure(`nesting deeper than ${MAX_DEPTH}`, open)
    const result: { [key: string]: JsonValue } = {}
    let i = this.skip(open + 1)
    for (;;) {
      if (this.text[i] === '}') return { value: result, end: i + 1 }
      const c = this.text[i]
      if (c !== '"' && c !== "'") throw new Failure(`expected a quoted key, got ${describe(c)}`, i)
      const key = this.string(i)
      i = this.skip(key.end)
      if (this.text[i] !== ':') throw new Failure(`expected ':' after a key, got ${describe(this.text[i])}`, i)
      const item = this.value(i + 1, depth)
      // own data property: a key such as "__proto__" must not reach the prototype
      Object.defineProperty(result, key.value as string, {
        value: item.value,
        enumerable: true,
        writable: true,
        configurable: true,
      })
      i = this.skip(item.end)
      if (this.text[i] === ',') i = this.skip(i + 1)
      else if (this.text[i] !== '}') throw new Failure(`expected ',' or '}', got ${describe(this.text[i])}`, i)
    }
  }

  private array(open: number, depth: number): Read {
    if (depth > MAX_DEPTH) throw new Failure(`nesting deeper than ${MAX_DEPTH}`, open)
    const result: JsonValue[] = []
    let i = this.skip(open + 1)
    for (;;) {
      if (this.text[i] === ']') return { value: result, end: i + 1 }
      const item = this.value(i, depth)
      result.push(item.value)
      i = this.skip(item.end)
      if (this.text[i] === ',') i = this.skip(i + 1)
      else if (this.text[i] !== ']') throw new Failure(`expected ',' or ']', got ${describe(this.text[i])}`, i)
    }
  }

  private string(open: number): Read {
    const quote = this.text[open]!
    const plain = quote === '"' ? /[^"\\]+/y : /[^'\\]+/y
    let out = ''
    let i = open + 1
    for (;;) {
      plain.lastIndex = i
      const run = plain.exec(this.text)
      if (run) {
        out += run[0]
        i += run[0].length
      }
      const c = this.text[i]
      if (c === undefined) throw new Failure('unterminated string', open)
      if (c === quote) return { value: out, end: i + 1 }
      const e = this.text[i + 1]
      if (e === undefined) throw new Failure('unterminated escape', i)
      if (e === 'u') {
        const hex = this.text.slice(i + 2, i + 6)
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) throw new Failure(`bad unicode escape \\u${hex}`, i)
        out += String.fromCharCode(Number.parseInt(hex, 16))
        i += 6
      } else {
        // an unknown escape keeps its character
        out += SIMPLE_ESCAPES[e] ?? e
        i += 2
      }
    }
  }

  private number(start: number): Read {
    const match = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?/.exec(this.text.slice(start, start + 64))
    if (!match) throw new Failure('malformed number', start)
    return { value: Number(match[0]), end: start + match[0].length }
  }

  private skip(at: number): number {
    let i = at
    while (i < this.text.length && /\s/.test(this.text[i]!)) i++
    return i
  }
}

function describe(c: string | undefined): string {
  return c === undefined ? 'end of text' : JSON.stringify(c)
}
