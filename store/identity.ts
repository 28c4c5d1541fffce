// The store's identity record: a random id written once at the store's root under the reserved prefix
// (`.seedflow-store.json`), so a copy, a move or the same bucket reached through another endpoint is still the
// same store. Both backends create it with their create-if-absent write, so concurrent first callers agree.
import { randomUUID } from 'node:crypto'
import { z } from 'zod'
import { StoreIdentityError } from './errors.ts'
import { RESERVED_PREFIX } from './key-check.ts'

/** The identity record's name at the store's root (a folder's root, or the bucket prefix). */
export const IDENTITY_NAME = `${RESERVED_PREFIX}store.json`

const IdentityRecord = z.object({
  id: z.string().regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
  createdAt: z.string(),
})

/** The bytes of a new identity record. */
export function newIdentityRecord(now: Date = new Date()): Buffer {
  return Buffer.from(`${JSON.stringify({ id: randomUUID(), createdAt: now.toISOString() }, null, 2)}\n`, 'utf8')
}

/** The id of a stored identity record; StoreIdentityError naming `where` when it is not one. */
export function parseIdentityRecord(bytes: Uint8Array, where: string): string {
  let value: unknown
  try {
    value = JSON.parse(Buffer.from(bytes).toString('utf8'))
  } catch (error) {
    throw new StoreIdentityError(where, `not JSON (${(error as Error).message})`)
  }
  const parsed = IdentityRecord.safeParse(value)
  if (!parsed.success) {
    const fields = parsed.error.issues.map((i) => i.path.join('.') || '(record)').join(', ')
    throw new StoreIdentityError(where, `not an identity record (bad fields: ${fields})`)
  }
  return parsed.data.id
}

/** How a backend reads its identity record (undefined: there is none) and creates it if absent (false: it existed). */
export interface IdentityRecordIo {
  read(): Promise<Uint8Array | undefined>
  createIfAbsent(record: Buffer): Promise<unknown>
}

/**
 * The id at a store's root: read, else created with the backend's create-if-absent write (concurrent first callers
 * agree: the first creator's record holds) and read back. `where` names the record in errors.
 */
export async function readOrCreateIdentity(io: IdentityRecordIo, where: string): Promise<string> {
  let bytes = await io.read()
  if (bytes === undefined) {
    await io.createIfAbsent(newIdentityRecord())
    bytes = await io.read()
    if (bytes === undefined) throw new Error(`${where} was created but cannot be read back`)
  }
  return parseIdentityRecord(bytes, where)
}

/** `load`, run once and its promise shared, until it fails: the next call then tries again. */
export function sharedUntilFailure<T>(load: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined
  return () => {
    pending ??= load().catch((error: unknown) => {
      pending = undefined
      throw error
    })
    return pending
  }
}
