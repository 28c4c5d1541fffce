// The fault points as decorators (infra/faults.ts): the store wrapper, the phase hooks and the S3 store's
// multipart watcher that a worker's composition root wires in. Nothing fires without them.
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, afterEach, before, describe, it } from 'node:test'
import { runPhase } from '../../activities/phase.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { armedFaults, FaultInjected, rearmFaults, watchMultipartUpload, withStoreFaults } from '../../workers/faults.ts'

describe('fault decorators', () => {
  let root: string
  let plain: FsArtifactStore
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-fault-decorators-'))
    plain = new FsArtifactStore(root)
  })
  afterEach(() => rearmFaults(''))
  after(() => rm(root, { recursive: true, force: true }))

  it('a store and a phase that are not wired fire nothing', async () => {
    rearmFaults('store:before-put:throw,store:after-put:throw,rollout:mid-work:throw,rollout:after-manifest:throw')
    const scope = { runId: 'plain', phase: 'rollout' as const, shard: 0, iteration: 0 }
    await runPhase({ store: plain }, scope, { configSha256: 'c'.repeat(64), inputs: {} }, async () => ({
      outputs: { out: await plain.put('runs/plain/out', Buffer.from('x')) },
      stats: {},
    }))
    assert.equal(armedFaults().length, 4)
  })

  it('passes reads through and names the wrapped location', async () => {
    const store = withStoreFaults(plain)
    assert.equal(store.location, plain.location)
    await plain.put('runs/through/a', Buffer.from('a'))
    assert.equal((await store.get('runs/through/a')).toString(), 'a')
    assert.deepEqual(await store.head('runs/through/a'), await plain.head('runs/through/a'))
    assert.deepEqual(
      (await store.list('runs/through/')).objects.map((o) => o.key),
      ['runs/through/a'],
    )
    await store.delete('runs/through/a')
    assert.equal(await plain.head('runs/through/a'), undefined)
  })

  it('fires after-put of putIfAbsent only when it created the object', async () => {
    const store = withStoreFaults(plain)
    rearmFaults('store:after-put:once/k:throw')
    await assert.rejects(store.putIfAbsent('runs/once/k', Buffer.from('1')), FaultInjected)
    assert.ok(await plain.head('runs/once/k'), 'written before the fault')
    rearmFaults('store:after-put:once/k:throw')
    const again = await store.putIfAbsent('runs/once/k', Buffer.from('2'))
    assert.equal(again.created, false)
    assert.equal(armedFaults().length, 1, 'still armed')
  })

  it('refuses an invalid key before before-put fires', async () => {
    const store = withStoreFaults(plain)
    rearmFaults('store:before-put:throw')
    await assert.rejects(store.put('../outside', Buffer.from('x')), { name: 'InvalidKeyError' })
    assert.equal(armedFaults().length, 1)
  })

  it('watches multipart uploads only when armed, and fires mid-multipart once a part went out', () => {
    assert.equal(
      watchMultipartUpload('p/big', () => {}),
      undefined,
    )
    rearmFaults('store:mid-multipart:big:throw')
    let aborted = 0
    const abort = () => aborted++
    watchMultipartUpload('p/small', abort)?.({ loaded: 8, total: 20 })
    assert.equal(aborted, 0, 'another key')
    const watch = watchMultipartUpload('p/big', abort)
    assert.ok(watch)
    watch({ loaded: 20, total: 20 })
    watch({ loaded: 0 })
    assert.equal(aborted, 0, 'nothing left, or nothing sent')
    watch({ loaded: 8 })
    assert.equal(aborted, 1)
    assert.deepEqual(armedFaults(), [])
    watch({ loaded: 16, total: 20 })
    assert.equal(aborted, 1, 'at most once')
  })
})
