// A store that counts what is read from the store it wraps: per key, the reads and their bytes. What a test
// checks ("the second update on the same worker read no checkpoint from the store") and what an operator can
// print; writes, heads and lists pass through uncounted.
import { PassThrough, type Readable } from 'node:stream'
import type { ArtifactStore } from './artifact-store.ts'

export interface KeyReads {
  reads: number
  bytes: number
}

export interface ReadCountingStore extends ArtifactStore {
  /** Reads by key since the store was made (or `resetReads`). */
  readonly reads: ReadonlyMap<string, KeyReads>
  resetReads(): void
}

/** Wraps `store`; `get` and `getStream` are counted (a stream's bytes as they pass). */
export function withReadCounts(store: ArtifactStore): ReadCountingStore {
  let reads = new Map<string, KeyReads>()
  const count = (key: string, bytes: number) => {
    const r = reads.get(key) ?? { reads: 0, bytes: 0 }
    reads.set(key, r)
    r.bytes += bytes
    return r
  }
  return {
    get location() {
      return store.location
    },
    get reads() {
      return reads
    },
    resetReads() {
      reads = new Map()
    },
    put: (key, data) => store.put(key, data),
    putStream: (key, data) => store.putStream(key, data),
    putIfAbsent: (key, data) => store.putIfAbsent(key, data),
    async get(key) {
      const data = await store.get(key)
      count(key, data.byteLength).reads++
      return data
    },
    async getStream(key) {
      const source = await store.getStream(key)
      const r = count(key, 0)
      r.reads++
      const counted = new PassThrough()
      source.on('data', (chunk: Buffer) => {
        r.bytes += chunk.byteLength
      })
      source.on('error', (error) => counted.destroy(error))
      return source.pipe(counted) as Readable
    },
    head: (key) => store.head(key),
    list: (prefix, options) => store.list(prefix, options),
    delete: (key) => store.delete(key),
    identity: () => store.identity(),
  }
}
