// A folder store copied as operators copy folders (cp -a, a tar restore): every file gets a new inode, so none
// has the checksum sidecar named by its own inode (issue 40, item 2). The copy reads as the original, a flipped
// bit and a file placed by hand are still refused, and the first read makes the next ones cheap again.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { reindexCommand, UnverifiedFilesError } from '../../cli/reindex-command.ts'
import { IntegrityError } from '../../store/errors.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { sha256Hex } from '../../store/hash.ts'

const run = promisify(execFile)

const KEYS = ['runs/r/run.json', 'runs/r/plan.json', 'runs/r/iterations/0000/rollouts/0000.jsonl.gz', 'big/blob.bin']

async function streamed(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

describe('a copied folder store', () => {
  let parent: string
  let original: FsArtifactStore
  const bodies = new Map<string, Buffer>()
  let made = 0

  /** A `cp -a` copy of the original store, as a new store object. */
  async function copied(): Promise<{ root: string; store: FsArtifactStore }> {
    const root = join(parent, `copy-${made++}`)
    await run('cp', ['-a', original.root, root])
    return { root, store: new FsArtifactStore(root) }
  }

  before(async () => {
    parent = await mkdtemp(join(tmpdir(), 'seedflow-fs-copy-'))
    original = new FsArtifactStore(join(parent, 'store'))
    await original.identity() // made before the copies: each copy keeps it
    for (const key of KEYS) {
      const body = key === 'big/blob.bin' ? randomBytes(3 * 1024 * 1024 + 7) : Buffer.from(`${key}\n`.repeat(50))
      bodies.set(key, body)
      if (key === 'big/blob.bin') await original.putStream(key, Readable.from([body]))
      else await original.put(key, body)
    }
    await original.put('runs/r/run.json', Buffer.from('an older version')) // a key with two recorded versions
    await original.put('runs/r/run.json', bodies.get('runs/r/run.json') as Buffer)
  })

  after(async () => rm(parent, { recursive: true, force: true }))

  it('gives every file of a cp -a copy a new inode (so the copy has no sidecar named by its own inode)', async () => {
    const { root } = await copied()
    for (const key of KEYS) {
      assert.notEqual((await stat(join(root, key))).ino, (await stat(join(original.root, key))).ino, key)
    }
  })

  it('reads every artifact of a cp -a copy with its recorded sha256: get, head and getStream', async () => {
    const { store } = await copied()
    for (const key of KEYS) {
      const body = bodies.get(key) as Buffer
      const info = { key, sha256: sha256Hex(body), bytes: body.length }
      assert.deepEqual(await store.head(key), info)
      assert.ok((await store.get(key)).equals(body), key)
      assert.ok((await streamed(await store.getStream(key))).equals(body), key)
    }
  })

  it('reads a copy restored from a tar archive', async () => {
    const archive = join(parent, `store-${made++}.tar`)
    const restored = join(parent, `restored-${made++}`)
    await run('tar', ['-C', original.root, '-cf', archive, '.'])
    await mkdir(restored)
    await run('tar', ['-C', restored, '-xf', archive])
    const store = new FsArtifactStore(restored)
    for (const key of KEYS) assert.ok((await store.get(key)).equals(bodies.get(key) as Buffer), key)
  })

  it('records the new inode on the first read: then head answers from the record without reading the file', async () => {
    const { root, store } = await copied()
    const key = 'big/blob.bin'
    const recorded = sha256Hex(bodies.get(key) as Buffer)
    assert.equal((await store.head(key))?.sha256, recorded) // hashes the bytes once, writes the sidecar
    const sidecars = await readdir(join(root, '.seedflow-meta', 'big'))
    assert.ok(sidecars.includes(`blob.bin.${(await stat(join(root, key))).ino}.json`), sidecars.join(', '))
    // flip a bit in place (same inode, same size): a head that read the file would see another hash
    const path = join(root, key)
    const bytes = await readFile(path)
    bytes[1000] = (bytes[1000] as number) ^ 1
    await writeFile(path, bytes, { flag: 'r+' })
    assert.equal((await store.head(key))?.sha256, recorded)
    await assert.rejects(store.get(key), IntegrityError)
  })

  it('refuses a copied file with one flipped bit: IntegrityError naming the key and the recorded sha256', async () => {
    const { root, store } = await copied()
    const key = 'runs/r/iterations/0000/rollouts/0000.jsonl.gz'
    const path = join(root, key)
    const bytes = await readFile(path)
    bytes[7] = (bytes[7] as number) ^ 0x10
    await writeFile(path, bytes)
    const expected = sha256Hex(bodies.get(key) as Buffer)
    for (const read of [() => store.get(key), () => store.head(key), () => store.getStream(key)]) {
      await assert.rejects(read(), (e: unknown) => {
        assert.ok(e instanceof IntegrityError, String(e))
        assert.equal(e.key, key)
        assert.equal(e.expected, expected)
        assert.equal(e.actual, sha256Hex(bytes))
        assert.match(e.message, /no checksum record of its own .* none of the 1 recorded version\(s\) of the key/)
        return true
      })
    }
  })

  it('refuses a file placed by hand in a copy, with no record of its key', async () => {
    const { root, store } = await copied()
    await writeFile(join(root, 'runs/r/placed.json'), '{"by":"hand"}')
    await assert.rejects(store.get('runs/r/placed.json'), (e: unknown) => {
      assert.ok(e instanceof IntegrityError, String(e))
      assert.match(e.message, /no recorded checksum \(a file placed by hand, or a write cut short\)/)
      return true
    })
  })

  it('accepts only versions that were written to that very key', async () => {
    const { root, store } = await copied()
    // the bytes of another key, copied over this one: recorded, but not for this key
    await writeFile(join(root, 'runs/r/plan.json'), bodies.get('runs/r/run.json') as Buffer)
    await assert.rejects(store.get('runs/r/plan.json'), IntegrityError)
    // an older version of run.json is a version written to run.json
    await writeFile(join(root, 'runs/r/run.json'), 'an older version')
    assert.equal((await store.get('runs/r/run.json')).toString(), 'an older version')
  })

  it('ignores a sidecar that happens to name the new inode but records another size', async () => {
    const { root, store } = await copied()
    const key = 'runs/r/plan.json'
    const ino = (await stat(join(root, key))).ino
    const stale = { sha256: 'e'.repeat(64), bytes: 3 }
    await writeFile(join(root, '.seedflow-meta', 'runs', 'r', `plan.json.${ino}.json`), JSON.stringify(stale))
    assert.deepEqual(await store.head(key), {
      key,
      sha256: sha256Hex(bodies.get(key) as Buffer),
      bytes: (bodies.get(key) as Buffer).length,
    })
  })

  it('reindex records every file of a copy once, and lists the files nothing vouches for', async () => {
    const { root, store } = await copied()
    await writeFile(join(root, 'runs/r/placed.json'), 'by hand')
    const first = await store.reindex()
    assert.equal(first.adopted, KEYS.length)
    assert.equal(first.recorded, 0)
    assert.deepEqual(
      first.unverified.map((u) => u.key),
      ['runs/r/placed.json'],
    )
    const second = await store.reindex()
    assert.deepEqual([second.adopted, second.recorded, second.unverified.length], [0, KEYS.length, 1])
  })

  it('seedflow store reindex prints what it found, and fails naming a file that nothing vouches for', async () => {
    const { root, store } = await copied()
    let out = ''
    const io = {
      out: (text: string) => {
        out += text
      },
    }
    await reindexCommand(io, store)
    const id = (await original.identity()).id
    assert.equal(
      out,
      `store ${root} (id ${id})\n` +
        '  files read through their own checksum record: 0\n' +
        `  files given a record for their new inode (copied, restored or moved): ${KEYS.length}\n` +
        '  files no record vouches for: 0\n',
    )
    await writeFile(join(root, 'runs/r/placed.json'), 'by hand')
    out = ''
    await assert.rejects(reindexCommand(io, store), (e: unknown) => {
      assert.ok(e instanceof UnverifiedFilesError, String(e))
      assert.match(
        e.message,
        new RegExp(`^1 file\\(s\\) in ${root} have no checksum record .* the first: runs/r/placed\\.json`),
      )
      return true
    })
    assert.match(out, /files no record vouches for: 1\n {4}runs\/r\/placed\.json: integrity check failed/)
  })

  it('reads a copy on a read-only disk (no sidecar can be written for the new inodes: each read hashes again)', async () => {
    const { root } = await copied()
    const readOnly = async (path: unknown) => {
      throw Object.assign(new Error(`EROFS: read-only file system, open '${String(path)}'`), {
        code: 'EROFS',
        path: String(path),
      })
    }
    const store = new FsArtifactStore(root, { io: { mkdir: readOnly, writeFile: readOnly } })
    for (const key of KEYS) assert.ok((await store.get(key)).equals(bodies.get(key) as Buffer), key)
    const second = await store.reindex()
    assert.deepEqual([second.matched, second.adopted, second.recorded], [KEYS.length, 0, 0], 'nothing was recorded')
  })
})
