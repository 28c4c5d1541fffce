import type { Readable } from 'node:stream'

/** What the store recorded about one object when it was written. */
export interface ObjectInfo {
  key: string
  sha256: string
  bytes: number
}

/** One listed object. Listing does not return hashes (S3 lists no metadata): `head` a key for its sha256. */
export interface ListEntry {
  key: string
  bytes: number
}

export interface ListPage {
  objects: ListEntry[]
  /** Pass back as `cursor` to get the next page; absent on the last page. */
  nextCursor?: string
}

export interface ListOptions {
  /** At most this many objects per page (default and maximum 1000, as S3). */
  pageSize?: number
  cursor?: string
}

/** Which store this is: a random id made once and kept at the store's root, and where the store is. */
export interface StoreIdentity {
  id: string
  location: string
}

export interface CreateResult {
  /** False when the key already existed; nothing was written then. */
  created: boolean
  info: ObjectInfo
}

/**
 * Content-verified artifact storage. Every write records the sha256 of the bytes; every read checks it and
 * throws IntegrityError on a mismatch. Keys are relative paths checked by `assertValidKey`.
 */
export interface ArtifactStore {
  /** Human-readable location, e.g. `s3://bucket/prefix @ http://127.0.0.1:7070` or a folder path. */
  readonly location: string
  put(key: string, data: Uint8Array): Promise<ObjectInfo>
  /** Streams `data` to the store (multipart where the backend has it); visible only once complete. */
  putStream(key: string, data: Readable): Promise<ObjectInfo>
  /** Writes only if `key` does not exist; exactly one of many concurrent callers wins. */
  putIfAbsent(key: string, data: Uint8Array): Promise<CreateResult>
  get(key: string): Promise<Buffer>
  /** A stream of the object's bytes; it errors with IntegrityError at the end if the hash does not match. */
  getStream(key: string): Promise<Readable>
  /** The recorded info, or undefined when the key does not exist. */
  head(key: string): Promise<ObjectInfo | undefined>
  list(prefix: string, options?: ListOptions): Promise<ListPage>
  /** Deleting a missing key is not an error. */
  delete(key: string): Promise<void>
  /**
   * The store's identity; the first call on a new store creates the id (create-if-absent: concurrent first
   * callers agree on one id).
   */
  identity(): Promise<StoreIdentity>
}

export const MAX_PAGE_SIZE = 1000

export function pageSizeOf(options: ListOptions | undefined): number {
  const size = options?.pageSize ?? MAX_PAGE_SIZE
  if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE) {
    throw new RangeError(`pageSize must be an integer in 1..${MAX_PAGE_SIZE}, got ${size}`)
  }
  return size
}

/** Every object under `prefix`, page after page. */
export async function* listAll(store: ArtifactStore, prefix: string): AsyncGenerator<ListEntry> {
  let cursor: string | undefined
  do {
    const page = await store.list(prefix, cursor === undefined ? {} : { cursor })
    yield* page.objects
    cursor = page.nextCursor
  } while (cursor !== undefined)
}
