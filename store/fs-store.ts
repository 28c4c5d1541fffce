import { randomUUID } from 'node:crypto'
import type { Dirent, Stats } from 'node:fs'
import { createWriteStream } from 'node:fs'
import {
  type FileHandle,
  link,
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  unlink,
  writeFile,
} from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import type { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import {
  type ArtifactStore,
  type CreateResult,
  type ListEntry,
  type ListOptions,
  type ListPage,
  type ObjectInfo,
  pageSizeOf,
  type StoreIdentity,
} from './artifact-store.ts'
import { IntegrityError, NotFoundError } from './errors.ts'
import { typedFsError } from './fs-errors.ts'
import { errorCode, hashHandle, type Meta, Sidecars, TMP_DIR } from './fs-sidecars.ts'
import { HashingStream, sha256Hex, VerifyingStream } from './hash.ts'
import { IDENTITY_NAME, readOrCreateIdentity, sharedUntilFailure } from './identity.ts'
import { assertValidKey, assertValidPrefix, RESERVED_PREFIX } from './key-check.ts'

const NO_RECORD = 'no recorded checksum (a file placed by hand, or a write cut short)'

/** A data file together with the record of that very version of it. */
interface Opened {
  meta: Meta
  /**
   * How its record was found: `own` its own sidecar; `adopted` matched to a record of its key (a copied store) and
   * its own sidecar written; `matched` matched, but no sidecar could be written (a read-only store).
   */
  via: 'own' | 'adopted' | 'matched'
  close(): Promise<void>
  read(): Promise<Buffer>
  stream(): Readable
}

/** The file-system calls through which the store writes: a seam for tests (a full disk, a refused folder). */
export interface FsStoreIo {
  mkdir: typeof mkdir
  writeFile: typeof writeFile
  rename: typeof rename
  link: typeof link
  createWriteStream: typeof createWriteStream
}

export interface FsStoreOptions {
  /** Replaces some of the store's write calls (tests inject ENOSPC or EACCES through it). */
  io?: Partial<FsStoreIo>
}

/** What `reindex` found: every data file of the store, by how its record was found. */
export interface ReindexReport {
  /** Files read through their own sidecar. */
  recorded: number
  /** Files without a sidecar of their own (a copy, a restore) whose bytes a record of their key holds: sidecar written. */
  adopted: number
  /** Such files whose sidecar could not be written (a read-only store): each read hashes them again. */
  matched: number
  /** Files whose bytes no record holds (placed by hand, cut short, or damaged), with the store's message. */
  unverified: Array<{ key: string; message: string }>
}

/**
 * Artifacts as plain files under `root` (browsable as they are), with the sha256 in a sidecar tree under
 * `root/.seedflow-meta`, one sidecar per version of a file, named by the file's inode (`<key>.<inode>.json`).
 * A writer records the sidecar of its fully written, fsynced temp file first, then makes the data visible by
 * one rename (or link, for create-if-absent), which keeps the inode. So whatever version a reader opens, the
 * sidecar for exactly that version already exists, however many writers race on the key.
 *
 * A copy of the store (`cp -a`, rsync, a tar restore, a move to another disk) gives every file a new inode, so
 * its own sidecar is missing: the reader then hashes the bytes and accepts them only when a sidecar of the same
 * key (the sidecars travel with the copy, whatever inode they name) records that sha256 and size, and writes the
 * sidecar for the new inode, so the next read is cheap again. A file that no record of its key vouches for
 * (placed by hand, half-written by a crash, or damaged in the copy) reads as an IntegrityError.
 */
export class FsArtifactStore implements ArtifactStore {
  readonly root: string
  readonly location: string
  readonly #io: FsStoreIo
  readonly #sidecars: Sidecars
  readonly #identity = sharedUntilFailure(() => this.#writing(IDENTITY_NAME, () => this.#readOrCreateIdentity()))

  constructor(root: string, options: FsStoreOptions = {}) {
    this.root = resolve(root)
    this.location = this.root
    this.#io = { mkdir, writeFile, rename, link, createWriteStream, ...options.io }
    this.#sidecars = new Sidecars(this.root, this.#io)
  }

  async put(key: string, data: Uint8Array): Promise<ObjectInfo> {
    assertValidKey(key)
    return this.#writing(key, async () => {
      const tmp = await this.#writeTemp(async (path) => this.#io.writeFile(path, data, { flag: 'wx' }))
      return this.#publish(key, tmp, { sha256: sha256Hex(data), bytes: data.byteLength })
    })
  }

  async putStream(key: string, data: Readable): Promise<ObjectInfo> {
    assertValidKey(key)
    return this.#writing(key, async () => {
      const hashing = new HashingStream()
      const tmp = await this.#writeTemp((path) =>
        pipeline(data, hashing, this.#io.createWriteStream(path, { flags: 'wx' })),
      )
      return this.#publish(key, tmp, { sha256: hashing.digest(), bytes: hashing.bytes })
    })
  }

  async putIfAbsent(key: string, data: Uint8Array): Promise<CreateResult> {
    assertValidKey(key)
    return this.#writing(key, () => this.#putIfAbsent(key, data))
  }

  async get(key: string): Promise<Buffer> {
    const opened = await this.#open(key)
    try {
      const bytes = await this.#reading(key, () => opened.read())
      const actual = sha256Hex(bytes)
      if (actual !== opened.meta.sha256) throw new IntegrityError(key, opened.meta.sha256, actual)
      return bytes
    } finally {
      await opened.close()
    }
  }

  async getStream(key: string): Promise<Readable> {
    const opened = await this.#open(key)
    const expected = opened.meta.sha256
    return opened.stream().pipe(new VerifyingStream(expected, (actual) => new IntegrityError(key, expected, actual)))
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    try {
      const opened = await this.#open(key)
      await opened.close()
      return { key, sha256: opened.meta.sha256, bytes: opened.meta.bytes }
    } catch (error) {
      if (error instanceof NotFoundError) return undefined
      throw error
    }
  }

  async list(prefix: string, options?: ListOptions): Promise<ListPage> {
    assertValidPrefix(prefix)
    const pageSize = pageSizeOf(options)
    const after = options?.cursor === undefined ? undefined : decodeCursor(options.cursor)
    const slash = prefix.lastIndexOf('/')
    const base = slash < 0 ? '' : prefix.slice(0, slash)
    const keys = (await this.#reading(prefix || '(all)', () => this.#walk(base)))
      .filter((k) => k.startsWith(prefix) && (after === undefined || compareKeys(k, after) > 0))
      .sort(compareKeys)
    const pageKeys = keys.slice(0, pageSize)
    const objects: ListEntry[] = []
    for (const key of pageKeys) {
      const size = await stat(this.#dataPath(key)).then(
        (s) => s.size,
        () => undefined,
      ) // deleted meanwhile
      if (size !== undefined) objects.push({ key, bytes: size })
    }
    const last = pageKeys.at(-1)
    return keys.length > pageSize && last !== undefined ? { objects, nextCursor: encodeCursor(last) } : { objects }
  }

  async delete(key: string): Promise<void> {
    assertValidKey(key)
    return this.#writing(key, async () => {
      await rm(this.#dataPath(key), { force: true })
      await this.#sidecars.removeAll(key)
    })
  }

  identity(): Promise<StoreIdentity> {
    return this.#identity()
  }

  /**
   * Reads every data file's record once, writing the sidecar of each file that has none of its own but whose
   * bytes a record of its key holds (after a copy or restore: the first reads are then cheap again).
   */
  async reindex(): Promise<ReindexReport> {
    const report: ReindexReport = { recorded: 0, adopted: 0, matched: 0, unverified: [] }
    for (const key of (await this.#walk('')).sort(compareKeys)) {
      try {
        const opened = await this.#open(key)
        await opened.close()
        if (opened.via === 'own') report.recorded++
        else report[opened.via]++
      } catch (error) {
        if (error instanceof NotFoundError) continue // deleted meanwhile
        if (!(error instanceof IntegrityError)) throw error
        report.unverified.push({ key, message: error.message })
      }
    }
    return report
  }

  #dataPath(key: string): string {
    return join(this.root, key)
  }

  /** Runs a write, turning a full disk or a refused folder into the store's typed errors. */
  async #writing<T>(key: string, write: () => Promise<T>): Promise<T> {
    try {
      return await write()
    } catch (error) {
      throw typedFsError(error, { key, path: this.#dataPath(key), store: this.root, operation: 'write' })
    }
  }

  /** Runs a read, turning a refused folder into the store's typed error. */
  async #reading<T>(key: string, read: () => Promise<T>): Promise<T> {
    try {
      return await read()
    } catch (error) {
      throw typedFsError(error, { key, path: this.#dataPath(key), store: this.root, operation: 'read' })
    }
  }

  async #putIfAbsent(key: string, data: Uint8Array): Promise<CreateResult> {
    const tmp = await this.#writeTemp(async (path) => this.#io.writeFile(path, data, { flag: 'wx' }))
    const info: ObjectInfo = { key, sha256: sha256Hex(data), bytes: data.byteLength }
    await this.#sidecars.write(key, tmp.ino, { sha256: info.sha256, bytes: info.bytes })
    const final = this.#dataPath(key)
    try {
      await this.#io.mkdir(dirname(final), { recursive: true })
      await this.#io.link(tmp.path, final) // fails with EEXIST for every caller but one
    } catch (error) {
      await unlink(tmp.path).catch(() => {})
      await this.#sidecars.remove(key, tmp.ino) // this version never became visible
      if (errorCode(error) !== 'EEXIST') throw error
      const existing = await this.head(key)
      if (!existing) throw new Error(`putIfAbsent(${key}): exists but vanished before it could be read`)
      return { created: false, info: existing }
    }
    await unlink(tmp.path)
    return { created: true, info }
  }

  /** The identity record at the root, created by link (create-if-absent) from a fully written temp file. */
  async #readOrCreateIdentity(): Promise<StoreIdentity> {
    const path = join(this.root, IDENTITY_NAME)
    const id = await readOrCreateIdentity(
      {
        read: () =>
          readFile(path).then(
            (bytes) => bytes,
            (error: unknown) => (errorCode(error) === 'ENOENT' ? undefined : Promise.reject(error)),
          ),
        createIfAbsent: async (record) => {
          const tmp = await this.#writeTemp((p) => this.#io.writeFile(p, record, { flag: 'wx' }))
          try {
            await this.#io.link(tmp.path, path) // EEXIST: another caller created it first, and its id holds
          } catch (error) {
            if (errorCode(error) !== 'EEXIST') throw error
          } finally {
            await unlink(tmp.path).catch(() => {})
          }
        },
      },
      path,
    )
    return { id, location: this.location }
  }

  async #writeTemp(write: (path: string) => Promise<void>): Promise<{ path: string; ino: number }> {
    const dir = join(this.root, TMP_DIR)
    await this.#io.mkdir(dir, { recursive: true })
    const path = join(dir, randomUUID())
    try {
      await write(path)
      const handle = await open(path, 'r+')
      try {
        await handle.sync()
        return { path, ino: (await handle.stat()).ino }
      } finally {
        await handle.close()
      }
    } catch (error) {
      await rm(path, { force: true })
      throw error
    }
  }

  async #publish(key: string, tmp: { path: string; ino: number }, hashed: { sha256: string; bytes: number }) {
    const final = this.#dataPath(key)
    try {
      await this.#sidecars.write(key, tmp.ino, hashed)
      await this.#io.mkdir(dirname(final), { recursive: true })
      await this.#io.rename(tmp.path, final)
    } catch (error) {
      await rm(tmp.path, { force: true })
      await this.#sidecars.remove(key, tmp.ino)
      throw error
    }
    return { key, ...hashed }
  }

  /** Opens the data file and the record of that very version of it. */
  async #open(key: string): Promise<Opened> {
    assertValidKey(key)
    const path = this.#dataPath(key)
    let handle: FileHandle
    try {
      handle = await open(path, 'r')
    } catch (error) {
      const code = errorCode(error)
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') throw new NotFoundError(key, this.root)
      throw typedFsError(error, { key, path, store: this.root, operation: 'read' })
    }
    try {
      const stats: Stats = await handle.stat()
      if (stats.isDirectory()) throw new NotFoundError(key, this.root)
      const own = await this.#sidecars.read(key, stats.ino)
      const fits = own !== undefined && own !== 'damaged' && own.bytes === stats.size
      const { meta, via } = fits ? { meta: own, via: 'own' as const } : await this.#adopt(key, handle, stats, own)
      return {
        meta,
        via,
        close: () => handle.close(),
        read: () => handle.readFile(),
        stream: () => handle.createReadStream({ start: 0 }),
      }
    } catch (error) {
      await handle.close()
      throw error
    }
  }

  /**
   * The record of a file whose own sidecar is missing (a copied, restored or moved store gives it a new inode) or
   * does not fit it (a sidecar of another file that happens to have held this inode number): hashes the bytes and
   * accepts them only when a record of this key holds that sha256 and size, then writes the sidecar for this inode
   * while the file is open (so the inode cannot be reused meanwhile). A store that cannot be written (a read-only
   * backup) is still read, only not made faster.
   */
  async #adopt(
    key: string,
    handle: FileHandle,
    stats: Stats,
    own: Meta | 'damaged' | undefined,
  ): Promise<{ meta: Meta; via: 'adopted' | 'matched' }> {
    const actual = await hashHandle(handle)
    const records = await this.#sidecars.records(key)
    const match = records.find((r) => r.sha256 === actual.sha256 && r.bytes === actual.bytes)
    if (!match) {
      if (own === 'damaged') {
        const detail = `its checksum record ${this.#sidecars.path(key, stats.ino)} is damaged (not a JSON record)`
        throw new IntegrityError(key, undefined, actual.sha256, detail)
      }
      if (own) {
        const detail = `recorded ${own.bytes} bytes, the file holds ${actual.bytes}`
        throw new IntegrityError(key, own.sha256, actual.sha256, detail)
      }
      if (records.length === 0) throw new IntegrityError(key, undefined, actual.sha256, NO_RECORD)
      const sameSize = records.filter((r) => r.bytes === actual.bytes)
      const expected = records.length === 1 ? records[0] : sameSize.length === 1 ? sameSize[0] : undefined
      const detail =
        `the file has no checksum record of its own (a copied or restored store) and its bytes are none of the ` +
        `${records.length} recorded version(s) of the key`
      throw new IntegrityError(key, expected?.sha256, actual.sha256, detail)
    }
    const adopt = async () => {
      await this.#io.mkdir(join(this.root, TMP_DIR), { recursive: true }) // a copy may have left it out
      await this.#sidecars.write(key, stats.ino, match)
    }
    try {
      await adopt()
      return { meta: match, via: 'adopted' }
    } catch (error) {
      if (errorCode(error) === undefined) throw error
      return { meta: match, via: 'matched' } // a system error (read-only, full, refused) only costs speed
    }
  }

  async #walk(base: string): Promise<string[]> {
    const out: string[] = []
    const visit = async (relDir: string): Promise<void> => {
      let entries: Dirent[]
      try {
        entries = await readdir(join(this.root, relDir), { withFileTypes: true })
      } catch (error) {
        const code = errorCode(error)
        if (code === 'ENOENT' || code === 'ENOTDIR') return
        throw error
      }
      for (const entry of entries) {
        if (relDir === '' && entry.name.startsWith(RESERVED_PREFIX)) continue
        const rel = relDir === '' ? entry.name : `${relDir}/${entry.name}`
        if (entry.isDirectory()) await visit(rel)
        else if (entry.isFile()) out.push(rel)
      }
    }
    await visit(base)
    return out
  }
}

/** S3 orders keys by their UTF-8 bytes; so do we. */
function compareKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'))
}

function encodeCursor(key: string): string {
  return Buffer.from(key, 'utf8').toString('base64url')
}

function decodeCursor(cursor: string): string {
  return Buffer.from(cursor, 'base64url').toString('utf8')
}
