import { type ArtifactStore, type CreateResult, listAll, type ObjectInfo } from './artifact-store.ts'
import { IntegrityError, isDamagedObject } from './errors.ts'
import { sha256Hex } from './hash.ts'

/** Stable JSON: two-space indent, trailing newline, so equal values give equal bytes and equal hashes. */
export function encodeJson(value: unknown): Buffer {
  return Buffer.from(`${JSON.stringify(value, null, 2)}\n`, 'utf8')
}

export function putJson(store: ArtifactStore, key: string, value: unknown): Promise<ObjectInfo> {
  return store.put(key, encodeJson(value))
}

export function putJsonIfAbsent(store: ArtifactStore, key: string, value: unknown): Promise<CreateResult> {
  return store.putIfAbsent(key, encodeJson(value))
}

/**
 * The object's bytes, checked against the sha256 the caller was handed (a manifest's or a phase result's): the
 * store checks its own record on every read, this checks that the object is still the one the caller means.
 */
export async function getExpected(store: ArtifactStore, key: string, sha256: string): Promise<Buffer> {
  const bytes = await store.get(key)
  const actual = sha256Hex(bytes)
  if (actual !== sha256) throw new IntegrityError(key, sha256, actual, 'not the artifact the reader was handed')
  return bytes
}

/**
 * Parses a verified object (also against `sha256` when given); the caller validates the shape (with the
 * module's zod schema).
 */
export async function getJson(store: ArtifactStore, key: string, sha256?: string): Promise<unknown> {
  const bytes = sha256 === undefined ? await store.get(key) : await getExpected(store, key, sha256)
  try {
    return JSON.parse(bytes.toString('utf8'))
  } catch (error) {
    throw new SyntaxError(`${key} is not valid JSON: ${(error as Error).message}`)
  }
}

/** A stored object that could not be read as JSON, and why (isDamagedObject). */
export interface UnreadableObject {
  key: string
  error: Error
}

/**
 * Every JSON object under `prefix`, in key order, and apart the damaged ones (a record's readers report them and go
 * on, as audit and the report do). A store that fails still throws.
 */
export async function readJsonUnder(
  store: ArtifactStore,
  prefix: string,
): Promise<{ read: Array<{ key: string; value: unknown }>; unreadable: UnreadableObject[] }> {
  const read: Array<{ key: string; value: unknown }> = []
  const unreadable: UnreadableObject[] = []
  for await (const { key } of listAll(store, prefix)) {
    try {
      read.push({ key, value: await getJson(store, key) })
    } catch (error) {
      if (!isDamagedObject(error)) throw error
      unreadable.push({ key, error })
    }
  }
  return { read, unreadable }
}

/** JSON with object keys sorted at every level, so equal values hash equally whatever their key order. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
    )
  })
}
