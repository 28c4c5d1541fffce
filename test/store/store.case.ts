// One conformance suite for every ArtifactStore backend (docs/design.md §11.3: a second backend gets the same tests).
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import { after, before, describe, it } from 'node:test'
import { type ArtifactStore, listAll } from '../../store/artifact-store.ts'
import { IntegrityError, InvalidKeyError, NotFoundError } from '../../store/errors.ts'
import { getJson, putJson } from '../../store/json.ts'

export interface StoreFixture {
  store: ArtifactStore
  /** Changes the stored bytes of `key` behind the store's back, keeping its recorded hash. */
  corrupt(key: string): Promise<void>
  cleanup(): Promise<void>
  /** `count` store objects over one new, empty store (a new folder, a new bucket prefix): first callers racing. */
  fresh(count: number): Promise<ArtifactStore[]>
  /**
   * The fixture's store reached another way, which must keep its identity: a `cp -a` copy of the folder, the same
   * bucket and prefix through a second endpoint.
   */
  reachedAnotherWay(): Promise<ArtifactStore>
}

const MIB = 1024 * 1024

/** Deterministic pseudo-random bytes, produced chunk by chunk so the test never holds them all. */
function* patternChunks(totalBytes: number, chunkBytes = MIB): Generator<Buffer> {
  for (let offset = 0, i = 0; offset < totalBytes; offset += chunkBytes, i++) {
    const n = Math.min(chunkBytes, totalBytes - offset)
    const chunk = Buffer.alloc(n)
    let x = (i + 1) * 2654435761
    for (let j = 0; j < n; j += 4) {
      x = (x ^ (x << 13)) >>> 0
      x = (x ^ (x >>> 17)) >>> 0
      x = (x ^ (x << 5)) >>> 0
      chunk.writeUInt32LE(x, j)
    }
    yield chunk
  }
}

async function hashStream(stream: Readable): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256')
  let bytes = 0
  for await (const chunk of stream) {
    hash.update(chunk as Buffer)
    bytes += (chunk as Buffer).length
  }
  return { sha256: hash.digest('hex'), bytes }
}

export function describeStoreConformance(name: string, makeFixture: () => Promise<StoreFixture>): void {
  describe(`ArtifactStore conformance: ${name}`, () => {
    let fx: StoreFixture
    let store: ArtifactStore
    before(async () => {
      fx = await makeFixture()
      store = fx.store
    })
    after(async () => fx?.cleanup())

    for (const [label, size] of [
      ['empty', 0],
      ['1 KiB', 1024],
    ] as const) {
      it(`round-trips a ${label} object with its sha256 and size`, async () => {
        const data = randomBytes(size)
        const key = `roundtrip/${size}.bin`
        const info = await store.put(key, data)
        const expected = createHash('sha256').update(data).digest('hex')
        assert.deepEqual(info, { key, sha256: expected, bytes: size })
        assert.deepEqual(await store.head(key), info)
        assert.ok((await store.get(key)).equals(data))
        assert.deepEqual(await hashStream(await store.getStream(key)), { sha256: expected, bytes: size })
      })
    }

    it('streams a 64 MiB object in and out (multipart where the backend has it)', async () => {
      const total = 64 * MIB
      const expected = createHash('sha256')
      for (const chunk of patternChunks(total)) expected.update(chunk)
      const sha256 = expected.digest('hex')
      const info = await store.putStream('large/64mib.bin', Readable.from(patternChunks(total)))
      assert.deepEqual(info, { key: 'large/64mib.bin', sha256, bytes: total })
      assert.deepEqual(await store.head('large/64mib.bin'), info)
      assert.deepEqual(await hashStream(await store.getStream('large/64mib.bin')), { sha256, bytes: total })
    })

    it('lists more than 1,000 keys in pages, in key order, without duplicates', async () => {
      const keys = Array.from({ length: 1050 }, (_, i) => `many/k${String(i).padStart(5, '0')}.txt`)
      for (let i = 0; i < keys.length; i += 25) {
        await Promise.all(keys.slice(i, i + 25).map((key) => store.put(key, Buffer.from(key))))
      }
      const first = await store.list('many/')
      assert.equal(first.objects.length, 1000)
      assert.ok(first.nextCursor, 'a first page of 1,000 out of 1,050 has a cursor')
      const second = await store.list('many/', { cursor: first.nextCursor as string })
      assert.equal(second.objects.length, 50)
      assert.equal(second.nextCursor, undefined)
      const listed = [...first.objects, ...second.objects]
      assert.deepEqual(
        listed.map((o) => o.key),
        keys,
      )
      assert.equal(listed[0]?.bytes, Buffer.byteLength(keys[0] as string))
      const small: string[] = []
      let cursor: string | undefined
      let pages = 0
      do {
        const page = await store.list('many/k00', { pageSize: 100, ...(cursor ? { cursor } : {}) })
        small.push(...page.objects.map((o) => o.key))
        cursor = page.nextCursor
        pages++
      } while (cursor)
      // 10 full pages; S3 servers may end with one empty page when the last full page left nothing over.
      assert.ok(pages === 10 || pages === 11, `keys many/k00000..k00999 in pages of 100 took ${pages} pages`)
      assert.deepEqual(small, keys.slice(0, 1000))
      let all = 0
      for await (const _ of listAll(store, 'many/')) all++
      assert.equal(all, 1050)
    })

    it('gives a typed NotFoundError for a missing key', async () => {
      await assert.rejects(
        store.get('missing/nothing.bin'),
        (e: unknown) => e instanceof NotFoundError && e.key === 'missing/nothing.bin',
      )
      await assert.rejects(store.getStream('missing/nothing.bin'), NotFoundError)
      assert.equal(await store.head('missing/nothing.bin'), undefined)
    })

    it('gives a typed IntegrityError naming the key and both hashes for a corrupted object', async () => {
      const data = Buffer.from('the original bytes of a checkpoint')
      const info = await store.put('corrupt/object.bin', data)
      await fx.corrupt('corrupt/object.bin')
      await assert.rejects(store.get('corrupt/object.bin'), (e: unknown) => {
        assert.ok(e instanceof IntegrityError, `expected IntegrityError, got ${e}`)
        assert.equal(e.key, 'corrupt/object.bin')
        assert.equal(e.expected, info.sha256)
        assert.ok(e.actual && e.actual !== info.sha256)
        assert.match(e.message, new RegExp(`corrupt/object\\.bin.*${info.sha256}.*${e.actual}`))
        return true
      })
      await assert.rejects(hashStream(await store.getStream('corrupt/object.bin')), IntegrityError)
    })

    it('lets exactly one of 20 concurrent create-if-absent calls on one key win', async () => {
      const key = 'race/manifest.json'
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => store.putIfAbsent(key, Buffer.from(`writer ${i}`))),
      )
      const winners = results.filter((r) => r.created)
      assert.equal(winners.length, 1)
      const winner = winners[0]?.info
      for (const r of results) assert.deepEqual(r.info, winner)
      assert.deepEqual(await store.head(key), winner)
      assert.equal(
        createHash('sha256')
          .update(await store.get(key))
          .digest('hex'),
        winner?.sha256,
      )
    })

    it('stays consistent under 10 concurrent overwrites of one key: one writer wins, hash and bytes agree', async () => {
      const key = 'race/overwritten.bin'
      const bodies = Array.from({ length: 10 }, (_, i) => Buffer.from(`version ${i} `.repeat(100 + i)))
      await Promise.all(bodies.map((b) => store.put(key, b)))
      const bytes = await store.get(key)
      assert.ok(
        bodies.some((b) => b.equals(bytes)),
        'the stored bytes are one of the written versions',
      )
      assert.deepEqual(await store.head(key), {
        key,
        sha256: createHash('sha256').update(bytes).digest('hex'),
        bytes: bytes.length,
      })
    })

    it('does not overwrite on create-if-absent when the key exists', async () => {
      await store.put('once/a.json', Buffer.from('first'))
      const second = await store.putIfAbsent('once/a.json', Buffer.from('second'))
      assert.equal(second.created, false)
      assert.equal((await store.get('once/a.json')).toString(), 'first')
    })

    it('overwrites with put and records the new hash', async () => {
      await store.put('over/x.txt', Buffer.from('old'))
      const info = await store.put('over/x.txt', Buffer.from('new content'))
      assert.deepEqual(await store.head('over/x.txt'), info)
      assert.equal((await store.get('over/x.txt')).toString(), 'new content')
    })

    it('deletes, and deleting a missing key is not an error', async () => {
      await store.put('del/x.txt', Buffer.from('x'))
      await store.delete('del/x.txt')
      assert.equal(await store.head('del/x.txt'), undefined)
      await store.delete('del/x.txt')
      assert.deepEqual((await store.list('del/')).objects, [])
    })

    it('gives the same identity on every call, with its location', async () => {
      const first = await store.identity()
      assert.match(first.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
      assert.equal(first.location, store.location)
      assert.deepEqual(await store.identity(), first)
    })

    it('gives one identity to 8 concurrent first callers on a new store, each with its own store object', async () => {
      const stores = await fx.fresh(8)
      const ids = await Promise.all(stores.map((s) => s.identity().then((i) => i.id)))
      assert.equal(new Set(ids).size, 1, `ids: ${ids.join(', ')}`)
    })

    it('keeps the identity out of listings and keys', async () => {
      await store.identity()
      assert.ok((await store.list('')).objects.every((o) => !o.key.startsWith('.seedflow-')))
      await assert.rejects(store.get('.seedflow-store.json'), InvalidKeyError)
    })

    it('keeps its identity when reached another way (a folder copied with cp -a; a bucket through another endpoint)', async () => {
      const id = (await store.identity()).id
      const other = await fx.reachedAnotherWay()
      assert.equal((await other.identity()).id, id)
    })

    it('round-trips JSON', async () => {
      const value = { run: 'r1', n: 3, nested: { ok: true } }
      await putJson(store, 'json/v.json', value)
      assert.deepEqual(await getJson(store, 'json/v.json'), value)
    })

    for (const bad of [
      '../escape',
      'a/../../b',
      '/etc/passwd',
      'a/./b',
      'a//b',
      'a\u0000b',
      'line\nbreak',
      'tab\there',
      '',
      'a\\b',
      '.seedflow-meta/x',
    ]) {
      it(`rejects the key ${JSON.stringify(bad)} before any I/O`, async () => {
        await assert.rejects(store.put(bad, Buffer.from('x')), InvalidKeyError)
        await assert.rejects(store.putIfAbsent(bad, Buffer.from('x')), InvalidKeyError)
        await assert.rejects(store.get(bad), InvalidKeyError)
        await assert.rejects(store.head(bad), InvalidKeyError)
        await assert.rejects(store.delete(bad), InvalidKeyError)
      })
    }
  })
}
