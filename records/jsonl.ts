import { gunzipSync, gzipSync } from 'node:zlib'

/** Records as gzipped JSON lines (trajectories, skills): one record per line, deterministic bytes. */
export function encodeJsonlGz(records: readonly unknown[]): Uint8Array {
  return gzipSync(Buffer.from(records.map((r) => `${JSON.stringify(r)}\n`).join(''), 'utf8'), { level: 6 })
}

export function decodeJsonlGz(bytes: Uint8Array, source: string): unknown[] {
  let text: string
  try {
    text = gunzipSync(bytes).toString('utf8')
  } catch (error) {
    throw new SyntaxError(`${source}: not gzip data (${(error as Error).message})`)
  }
  return text
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line, i) => {
      try {
        return JSON.parse(line)
      } catch (error) {
        throw new SyntaxError(`${source}: line ${i + 1} is not JSON (${(error as Error).message})`)
      }
    })
}
