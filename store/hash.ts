import { createHash, type Hash } from 'node:crypto'
import { Transform, type TransformCallback } from 'node:stream'
import type { ArtifactStore } from './artifact-store.ts'
import { IntegrityError, NotFoundError } from './errors.ts'

export function sha256Hex(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex')
}

/** Passes bytes through while hashing and counting them. */
export class HashingStream extends Transform {
  #hash: Hash = createHash('sha256')
  bytes = 0

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#hash.update(chunk)
    this.bytes += chunk.length
    callback(null, chunk)
  }

  digest(): string {
    return this.#hash.digest('hex')
  }
}

/**
 * Passes bytes through and, at the end, fails the stream with `onMismatch(actual)` if the sha256 of what
 * went through differs from `expected`.
 */
export class VerifyingStream extends Transform {
  #hash: Hash = createHash('sha256')

  constructor(
    private readonly expected: string,
    private readonly onMismatch: (actual: string) => Error,
  ) {
    super()
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#hash.update(chunk)
    callback(null, chunk)
  }

  override _flush(callback: TransformCallback): void {
    const actual = this.#hash.digest('hex')
    callback(actual === this.expected ? null : this.onMismatch(actual))
  }
}

/**
 * What an object's bytes hash to, read in full now, whatever its store recorded (a head answers the recorded
 * sha256, which a flipped bit does not change). `refused`: the store's own check failed; `sha256` is then that of
 * the bytes read (all of them when `bytes` > 0: the check runs at the end) or, when it refused before the first
 * byte (no record at all), the hash the error carries, if any.
 */
export type Rehashed =
  | { sha256: string; bytes: number; refused?: undefined }
  | { missing: true }
  | { refused: IntegrityError; sha256: string | undefined; bytes: number }

export async function rehashStored(store: ArtifactStore, key: string): Promise<Rehashed> {
  const hash = createHash('sha256')
  let bytes = 0
  try {
    for await (const chunk of await store.getStream(key)) {
      hash.update(chunk as Buffer)
      bytes += (chunk as Buffer).length
    }
  } catch (error) {
    if (error instanceof NotFoundError) return { missing: true }
    if (!(error instanceof IntegrityError)) throw error
    return { refused: error, sha256: bytes > 0 ? hash.digest('hex') : error.actual, bytes }
  }
  return { sha256: hash.digest('hex'), bytes }
}
