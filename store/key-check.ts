import { InvalidKeyError } from './errors.ts'

/** Reserved by the backends for their temporary and metadata files. */
export const RESERVED_PREFIX = '.seedflow-'

/**
 * Throws InvalidKeyError unless `key` is a relative, normalised, printable path. Every backend calls this
 * before touching storage, so a key accepted by one backend is accepted by all.
 */
export function assertValidKey(key: string): void {
  if (typeof key !== 'string' || key.length === 0) throw new InvalidKeyError(String(key), 'empty')
  if (key.length > 1024) throw new InvalidKeyError(key, `longer than 1024 characters (${key.length})`)
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what we reject
  if (/[\u0000-\u001f\u007f]/.test(key)) throw new InvalidKeyError(key, 'contains a control character')
  if (key.includes('\\')) throw new InvalidKeyError(key, 'contains a backslash')
  if (key.startsWith('/')) throw new InvalidKeyError(key, 'absolute path')
  for (const segment of key.split('/')) {
    if (segment === '') throw new InvalidKeyError(key, 'empty path segment')
    if (segment === '.' || segment === '..') throw new InvalidKeyError(key, `relative segment "${segment}"`)
    if (segment.startsWith(RESERVED_PREFIX))
      throw new InvalidKeyError(key, `segment uses the reserved prefix ${RESERVED_PREFIX}`)
  }
}

/** Prefixes may be empty or end with '/'; the part before must be a valid key. */
export function assertValidPrefix(prefix: string): void {
  if (prefix === '') return
  const body = prefix.endsWith('/') ? prefix.slice(0, -1) : prefix
  assertValidKey(body)
}
