import { createHash, type Hash } from 'node:crypto'
import { Transform, type TransformCallback } from 'node:stream'

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
