import { randomUUID } from 'node:crypto'
import type { Stats } from 'node:fs'
import { createWriteStream } from 'node:fs'
import { link, mkdir, open, readdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
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
} from './artifact-store.ts'
import { IntegrityError, NotFoundError } from './errors.ts'
import { HashingStream, sha256Hex, VerifyingStream } from './hash.ts'
import { assertValidKey, assertValidPrefix, RESERVED_PREFIX } from './key-check.ts'

const META_DIR = `${RESERVED_PREFIX}meta`
const TMP_DIR = `${RESERVED_PREFIX}tmp`

/** Sidecar record of one version of a data file (named by that file's inode: rename and link keep it). */
interface Meta {
  sha256: string
  bytes: number
}

/** A data file together with the sidecar written for that very file. */
interface Opened {
  meta: Meta
  close(): Promise<void>
  read(): Promise<Buffer>
  stream(): Readable
}

/**
 * Artifacts as plain files under `root` (browsable as they are), with the sha256 in a sidecar tree under
 * `root/.seedflow-meta`, one sidecar per version of a file, named by the file's inode (`<key>.<inode>.json`).
 * A writer records the sidecar of its fully written, fsynced temp file first, then makes the data visible by
 * one rename (or link, for create-if-absent), which keeps the inode. So whatever version a reader opens, the
 * sidecar for exactly that version already exists, however many writers race on the key; a data file
 * without one was placed by hand or half-written by a crash, and reads as an IntegrityError.
 */
export class FsArtifactStore implements ArtifactStore {
  readonly root: string
  readonly location: string

  constructor(root: string) {
    this.root = resolve(root)
    this.location = this.root
  }

  async put(key: string, data: Uint8Array): Promise<ObjectInfo> {
    assertValidKey(key)
    const tmp = await this.#writeTemp(async (path) => writeFile(path, data, { flag: 'wx' }))
    return this.#publish(key, tmp, { sha256: sha256Hex(data), bytes: data.byteLength })
  }

  async putStream(key: string, data: Readable): Promise<ObjectInfo> {
    assertValidKey(key)
    const hashing = new HashingStream()
    const tmp = await this.#writeTemp((path) => pipeline(data, hashing, createWriteStream(path, { flags: 'wx' })))
    return this.#publish(key, tmp, { sha256: hashing.digest(), bytes: hashing.bytes })
  }

  async putIfAbsent(key: string, data: Uint8Array): Promise<CreateResult> {
    assertValidKey(key)
    const tmp = await this.#writeTemp(async (path) => writeFile(path, data, { flag: 'wx' }))
    const info: ObjectInfo = { key, sha256: sha256Hex(data), bytes: data.byteLength }
    await this.#writeMeta(key, tmp.ino, { sha256: info.sha256, bytes: info.bytes })
    const final = this.#dataPath(key)
    try {
      await mkdir(dirname(final), { recursive: true })
      await link(tmp.path, final) // fails with EEXIST for every caller but one
    } catch (error) {
      await unlink(tmp.path).catch(() => {})
      await rm(this.#metaPath(key, tmp.ino), { force: true }) // this version never became visible
      if (errorCode(error) !== 'EEXIST') throw error
      const existing = await this.head(key)
      if (!existing) throw new Error(`putIfAbsent(${key}): exists but vanished before it could be read`)
      return { created: false, info: existing }
    }
    await unlink(tmp.path)
    return { created: true, info }
  }

  async get(key: string): Promise<Buffer> {
    const opened = await this.#open(key)
    try {
      const bytes = await opened.read()
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
    const keys = (await this.#walk(base))
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
    await rm(this.#dataPath(key), { force: true })
    const dir = dirname(this.#metaPath(key, 0))
    const prefix = `${basename(key)}.`
    let names: string[] = []
    try {
      names = await readdir(dir)
    } catch (error) {
      if (errorCode(error) !== 'ENOENT' && errorCode(error) !== 'ENOTDIR') throw error
    }
    for (const name of names) {
      if (name.startsWith(prefix) && /^\d+\.json$/.test(name.slice(prefix.length)))
        await rm(join(dir, name), { force: true })
    }
  }

  #dataPath(key: string): string {
    return join(this.root, key)
  }

  #metaPath(key: string, ino: number): string {
    return join(this.root, META_DIR, `${key}.${ino}.json`)
  }

  async #writeTemp(write: (path: string) => Promise<void>): Promise<{ path: string; ino: number }> {
    const dir = join(this.root, TMP_DIR)
    await mkdir(dir, { recursive: true })
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
      await this.#writeMeta(key, tmp.ino, hashed)
      await mkdir(dirname(final), { recursive: true })
      await rename(tmp.path, final)
    } catch (error) {
      await rm(tmp.path, { force: true })
      await rm(this.#metaPath(key, tmp.ino), { force: true })
      throw error
    }
    return { key, ...hashed }
  }

  async #writeMeta(key: string, ino: number, meta: Meta): Promise<void> {
    const path = this.#metaPath(key, ino)
    await mkdir(dirname(path), { recursive: true })
    const tmp = join(this.root, TMP_DIR, `${randomUUID()}.meta`)
    await writeFile(tmp, JSON.stringify(meta), { flag: 'wx' })
    await rename(tmp, path)
  }

  async #readMeta(key: string, ino: number): Promise<Meta | undefined> {
    try {
      return JSON.parse(await readFile(this.#metaPath(key, ino), 'utf8')) as Meta
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return undefined
      throw error
    }
  }

  /** Opens the data file and the sidecar of that very version of it. */
  async #open(key: string): Promise<Opened> {
    assertValidKey(key)
    const path = this.#dataPath(key)
    let handle: Awaited<ReturnType<typeof open>>
    try {
      handle = await open(path, 'r')
    } catch (error) {
      const code = errorCode(error)
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') throw new NotFoundError(key, this.root)
      throw error
    }
    try {
      const stats: Stats = await handle.stat()
      if (stats.isDirectory()) throw new NotFoundError(key, this.root)
      const meta = await this.#readMeta(key, stats.ino)
      if (!meta) {
        const actual = sha256Hex(await handle.readFile())
        throw new IntegrityError(
          key,
          undefined,
          actual,
          'no recorded checksum (a file placed by hand, or a write cut short)',
        )
      }
      return {
        meta,
        close: () => handle.close(),
        read: () => handle.readFile(),
        stream: () => handle.createReadStream(),
      }
    } catch (error) {
      await handle.close()
      throw error
    }
  }

  async #walk(base: string): Promise<string[]> {
    const out: string[] = []
    const visit = async (relDir: string): Promise<void> => {
      let entries: import('node:fs').Dirent[]
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

function errorCode(error: unknown): string | undefined {
  return (error as { code?: string } | null)?.code
}
