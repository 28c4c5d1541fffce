// The folder store's checksum records: one sidecar per version of a data file under `<root>/.seedflow-meta`, named
// by the inode of the file it describes (`<key>.<inode>.json`, holding its sha256 and size). Rename and link keep
// an inode, so a version and its record stay together however writers race; a copy of the store gives files new
// inodes, and then the sidecars of the key (they travel with the copy) are the list of its recorded versions.
import { createHash, randomUUID } from 'node:crypto'
import type { FileHandle, mkdir, rename, writeFile } from 'node:fs/promises'
import { readdir, readFile, rm } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import { RESERVED_PREFIX } from './key-check.ts'

export const META_DIR = `${RESERVED_PREFIX}meta`
export const TMP_DIR = `${RESERVED_PREFIX}tmp`

/** The record of one version of a data file. */
export interface Meta {
  sha256: string
  bytes: number
}

/** The file-system calls through which sidecars are written (the store's test seam). */
export interface SidecarIo {
  mkdir: typeof mkdir
  writeFile: typeof writeFile
  rename: typeof rename
}

export class Sidecars {
  constructor(
    private readonly root: string,
    private readonly io: SidecarIo,
  ) {}

  path(key: string, ino: number): string {
    return join(this.root, META_DIR, `${key}.${ino}.json`)
  }

  /** The sidecar of this very version: undefined when there is none, `damaged` when it does not parse. */
  async read(key: string, ino: number): Promise<Meta | 'damaged' | undefined> {
    let text: string
    try {
      text = await readFile(this.path(key, ino), 'utf8')
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return undefined
      throw error
    }
    return parseMeta(text) ?? 'damaged'
  }

  /** Writes the sidecar of inode `ino` whole (temp file, then rename). */
  async write(key: string, ino: number, meta: Meta): Promise<void> {
    const path = this.path(key, ino)
    await this.io.mkdir(dirname(path), { recursive: true })
    const tmp = join(this.root, TMP_DIR, `${randomUUID()}.meta`)
    await this.io.writeFile(tmp, JSON.stringify({ sha256: meta.sha256, bytes: meta.bytes }), { flag: 'wx' })
    await this.io.rename(tmp, path)
  }

  remove(key: string, ino: number): Promise<void> {
    return rm(this.path(key, ino), { force: true })
  }

  /** Removes every sidecar of the key (it was deleted). */
  async removeAll(key: string): Promise<void> {
    for (const name of await this.#names(key)) await rm(join(this.#dir(key), name), { force: true })
  }

  /** Every version of the key that a sidecar records, whatever inode it names (unreadable sidecars vouch for none). */
  async records(key: string): Promise<Meta[]> {
    const out: Meta[] = []
    for (const name of await this.#names(key)) {
      const text = await readFile(join(this.#dir(key), name), 'utf8').catch(() => undefined)
      const meta = text === undefined ? undefined : parseMeta(text)
      if (meta) out.push(meta)
    }
    return out
  }

  #dir(key: string): string {
    return dirname(join(this.root, META_DIR, key))
  }

  /** Names of the key's sidecars (`<name>.<inode>.json`) in its meta folder. */
  async #names(key: string): Promise<string[]> {
    let names: string[]
    try {
      names = await readdir(this.#dir(key))
    } catch (error) {
      if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR') return []
      throw error
    }
    const prefix = `${basename(key)}.`
    return names.filter((name) => name.startsWith(prefix) && /^\d+\.json$/.test(name.slice(prefix.length)))
  }
}

/** The sha256 and length of a file's bytes, read with positional reads (the handle's position stays at 0). */
export async function hashHandle(handle: FileHandle): Promise<Meta> {
  const hash = createHash('sha256')
  const buffer = Buffer.allocUnsafe(1024 * 1024)
  let position = 0
  for (;;) {
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, position)
    if (bytesRead === 0) break
    hash.update(buffer.subarray(0, bytesRead))
    position += bytesRead
  }
  return { sha256: hash.digest('hex'), bytes: position }
}

function parseMeta(text: string): Meta | undefined {
  try {
    const value = JSON.parse(text) as Partial<Meta>
    return typeof value.sha256 === 'string' && typeof value.bytes === 'number'
      ? { sha256: value.sha256, bytes: value.bytes }
      : undefined
  } catch {
    return undefined // an unreadable sidecar vouches for nothing
  }
}

export function errorCode(error: unknown): string | undefined {
  return (error as { code?: string } | null)?.code
}
