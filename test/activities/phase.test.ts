import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { DamagedArtifactsError } from '../../activities/damaged-artifacts.ts'
import { PhaseCounters, runPhase } from '../../activities/phase.ts'
import type { PhaseScope } from '../../records/phase-manifest.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { sha256Hex } from '../../store/hash.ts'
import { keys } from '../../store/keys.ts'
import { type CountersLine, countersWritingTo } from '../../workers/counters-file.ts'

describe('phase wrapper', () => {
  let root: string
  let store: FsArtifactStore
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-phase-'))
    store = new FsArtifactStore(root)
  })
  after(async () => rm(root, { recursive: true, force: true }))

  const scope = (shard: number): PhaseScope => ({ runId: 'r1', iteration: 0, phase: 'rollout', shard })
  /** A fake phase body that writes one output under its attempt's key and counts its calls. */
  const body = (shard: number, payload: string, calls: { n: number }) => async (ctx: { attempt: number }) => {
    calls.n++
    const info = await store.put(keys.rollouts('r1', 0, shard, ctx.attempt), Buffer.from(payload))
    return { outputs: { rollouts: info }, stats: { episodes: payload.length } }
  }

  it('computes once, then returns the finished manifest without recomputing', async () => {
    const counters = new PhaseCounters()
    const calls = { n: 0 }
    const spec = { configSha256: 'c1', inputs: { snapshot: 's1' } }
    const first = await runPhase({ store, counters }, scope(0), spec, body(0, 'abc', calls))
    const second = await runPhase({ store, counters }, scope(0), spec, body(0, 'abc', calls))
    assert.equal(calls.n, 1)
    assert.deepEqual([first.reused, second.reused], [false, true])
    assert.deepEqual(second.outputs, first.outputs)
    assert.deepEqual(second.stats, { episodes: 3 })
    assert.equal(counters.computed.get('rollout'), 1)
    assert.equal(counters.reused.get('rollout'), 1)
  })

  it('tells the counters file every event, with running totals', async () => {
    const file = join(root, 'counters', 'worker.jsonl')
    const counters = countersWritingTo(file)
    const calls = { n: 0 }
    const spec = { configSha256: 'c1', inputs: {} }
    await runPhase({ store, counters }, scope(5), spec, body(5, 'abc', calls))
    await runPhase({ store, counters }, scope(5), spec, body(5, 'abc', calls))
    const lines = (await readFile(file, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as CountersLine)
    assert.deepEqual(
      lines.map((l) => [l.event, l.phase, l.iteration, l.shard, l.attempt, l.computed.rollout, l.reused.rollout]),
      [
        ['computing', 'rollout', 0, 5, 0, undefined, undefined],
        ['computed', 'rollout', 0, 5, 0, 1, undefined],
        ['reused', 'rollout', 0, 5, 0, 1, 1],
      ],
    )
    assert.equal(lines[0]?.pid, process.pid)
  })

  it('recomputes under a new attempt when the config or an input changed, keeping the old attempt', async () => {
    const calls = { n: 0 }
    const a = await runPhase(
      { store },
      scope(1),
      { configSha256: 'c1', inputs: { snapshot: 's1' } },
      body(1, 'one', calls),
    )
    const b = await runPhase(
      { store },
      scope(1),
      { configSha256: 'c2', inputs: { snapshot: 's1' } },
      body(1, 'two', calls),
    )
    const c = await runPhase(
      { store },
      scope(1),
      { configSha256: 'c2', inputs: { snapshot: 's2' } },
      body(1, 'three', calls),
    )
    const again = await runPhase(
      { store },
      scope(1),
      { configSha256: 'c2', inputs: { snapshot: 's1' } },
      body(1, 'two', calls),
    )
    assert.deepEqual([a.attempt, b.attempt, c.attempt], [0, 1, 2])
    assert.equal(again.attempt, 1)
    assert.equal(again.reused, true)
    assert.equal(calls.n, 3)
    assert.equal((await store.get(keys.rollouts('r1', 0, 1, 0))).toString(), 'one')
    assert.equal((await store.get(keys.rollouts('r1', 0, 1, 2))).toString(), 'three')
  })

  it('does not reuse a manifest whose output was replaced or deleted', async () => {
    const calls = { n: 0 }
    const spec = { configSha256: 'c1', inputs: {} }
    await runPhase({ store }, scope(2), spec, body(2, 'data', calls))
    await store.put(keys.rollouts('r1', 0, 2, 0), Buffer.from('replaced'))
    const redo = await runPhase({ store }, scope(2), spec, body(2, 'data', calls))
    await store.delete(keys.rollouts('r1', 0, 2, 1))
    const again = await runPhase({ store }, scope(2), spec, body(2, 'data', calls))
    assert.deepEqual([redo.attempt, again.attempt], [1, 2])
    assert.equal(calls.n, 3)
    // bytes corrupted in place keep their recorded hash: the next reader gets an IntegrityError (store test)
    await writeFile(join(root, keys.rollouts('r1', 0, 2, 2)), 'tampered', { flag: 'r+' })
    await assert.rejects(store.get(keys.rollouts('r1', 0, 2, 2)), /integrity check failed/)
  })

  it('re-hashes a reused output in full: bytes damaged in place (same size) stop the phase, naming the key', async () => {
    const calls = { n: 0 }
    const spec = { configSha256: 'c1', inputs: {} }
    await runPhase({ store }, scope(6), spec, body(6, 'data', calls))
    const key = keys.rollouts('r1', 0, 6, 0)
    await writeFile(join(root, key), 'date', { flag: 'r+' }) // one bit: 'a' → 'e' is 0x61 → 0x65, same size
    assert.equal((await store.head(key))?.sha256, sha256Hex(Buffer.from('data')), 'head answers the recorded hash')
    await assert.rejects(runPhase({ store }, scope(6), spec, body(6, 'data', calls)), (e: Error) => {
      assert.ok(e instanceof DamagedArtifactsError)
      assert.equal(e.damaged.length, 1)
      assert.equal(e.damaged[0]?.key, key)
      assert.match(e.message, /run r1: 1 stored artifact it would reuse is damaged/)
      return true
    })
    assert.equal(calls.n, 1, 'not recomputed over the damaged output')
  })

  it('resumes from saved progress after an interrupted attempt', async () => {
    const spec = { configSha256: 'c1', inputs: {} }
    await assert.rejects(
      runPhase({ store }, scope(3), spec, async (ctx) => {
        await ctx.saveProgress({ episodesDone: 7 })
        throw new Error('worker crashed')
      }),
      /worker crashed/,
    )
    let resumedFrom: unknown
    const done = await runPhase({ store }, scope(3), spec, async (ctx) => {
      resumedFrom = await ctx.loadProgress()
      const info = await store.put(keys.rollouts('r1', 0, 3, ctx.attempt), Buffer.from('x'))
      return { outputs: { rollouts: info }, stats: {} }
    })
    assert.deepEqual(resumedFrom, { episodesDone: 7 })
    assert.equal(done.attempt, 0)
  })

  it('lets racing workers agree on one result', async () => {
    const calls = { n: 0 }
    const spec = { configSha256: 'c1', inputs: {} }
    const results = await Promise.all(
      Array.from({ length: 5 }, () => runPhase({ store }, scope(4), spec, body(4, 'same', calls))),
    )
    assert.equal(new Set(results.map((r) => r.manifestKey)).size, 1)
    assert.equal(results.filter((r) => !r.reused).length, 1)
  })
})
