// The README's generated blocks live between HTML comment markers (`<!-- name:begin -->` … `<!-- name:end -->`):
// a generator rewrites only what lies between them, and a test compares that text with what it would write.

/** A document without the two markers of a block, or with them out of order or more than once. */
export class MarkerError extends Error {
  override name = 'MarkerError'
}

export const beginMarker = (name: string) => `<!-- ${name}:begin -->`
export const endMarker = (name: string) => `<!-- ${name}:end -->`

function bounds(text: string, name: string, where: string): [number, number] {
  const begin = beginMarker(name)
  const end = endMarker(name)
  const from = text.indexOf(begin)
  const to = text.indexOf(end)
  const count = (marker: string) => text.split(marker).length - 1
  if (from < 0 || to < 0 || to < from || count(begin) !== 1 || count(end) !== 1)
    throw new MarkerError(
      `${where} needs exactly one ${begin} followed by one ${end} (found ${count(begin)} begin at ${from}, ` +
        `${count(end)} end at ${to})`,
    )
  return [from + begin.length, to]
}

/** The text between the block's markers, without the newlines that frame it. */
export function between(text: string, name: string, where = 'the document'): string {
  const [from, to] = bounds(text, name, where)
  return text.slice(from, to).replace(/^\n/, '').replace(/\n$/, '')
}

/** `text` with the block's content replaced by `body` (each marker keeps its own line). */
export function replaceBetween(text: string, name: string, body: string, where = 'the document'): string {
  const [from, to] = bounds(text, name, where)
  return `${text.slice(0, from)}\n${body.replace(/\n+$/, '')}\n${text.slice(to)}`
}

/**
 * `text` broken at spaces into lines of at most `width` characters; an inline code span is never broken, and a
 * longer word or span keeps its own line.
 */
export function wrap(text: string, width = 116): string {
  const lines: string[] = []
  let line = ''
  for (const word of text.match(/(?:[^\s`]*`[^`]*`)+[^\s`]*|\S+/g) ?? []) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line)
      line = word
    } else line = line ? `${line} ${word}` : word
  }
  if (line) lines.push(line)
  return lines.join('\n')
}

/**
 * Markdown tables without their padding: each cell trimmed, each separator cell `---` (alignment colons kept). The
 * formatter (biome) pads the README's tables to aligned columns; generators write them unpadded, and the two
 * compare equal through this.
 */
export function unpadTables(text: string): string {
  return text
    .split('\n')
    .map((line) =>
      line.startsWith('|')
        ? line
            .split(/(?<!\\)\|/)
            .map((cell) => cell.trim().replace(/^(:?)-+(:?)$/, '$1---$2'))
            .join('|')
        : line,
    )
    .join('\n')
}
