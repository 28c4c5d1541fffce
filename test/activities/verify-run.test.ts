// What a resumed run checks before it reuses anything: every artifact its current manifests record, re-hashed in
// full, each damaged one named (a micro run written to a folder store by the real pipeline activities).
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { ApplicationFailure } from '@temporalio/common'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import { verifyRun } from '../../activities/verify-run.ts'
import { createLocalEngine } from '../../engine/index.ts'
import type { PipelineActivities } from '../../records/contracts.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { keys } from '../../store/keys.ts'
import { microConfig } from '../compute/micro.ts'
import { type MicroRun, runMicro } from './micro-run.ts'

const RUN = 'verify-run'
const engine = createLocalEngine({ threads: 1 })

describe('verifying a stored run before reuse (folder store, real pipeline activities)', () => {
  let root: string
  let store: FsArtifactStore
  let acts: PipelineActivities
  let micro: MicroRun

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-verify-'))
    store = new FsArtifactStore(root)
    acts = createPipelineActivities({ store, engine })
    const c = microConfig('seed')
    micro = await runMicro(acts, RUN, { ...c, stage2: { ...c.stage2, iterations: 2 } })
  })

  after(async () => {
    await engine.close()
    await rm(root, { recursive: true, force: true })
  })

  /** Flips one bit in the middle of a stored file, in place (same size, same inode: its record still stands). */
  async function flipBit(key: string): Promise<() => Promise<void>> {
    const file = join(root, key)
    const original = await readFile(file)
    const damaged = Buffer.from(original)
    const at = Math.floor(damaged.length / 2)
    damaged[at] = (damaged[at] as number) ^ 0x01
    await writeFile(file, damaged, { flag: 'r+' })
    return () => writeFile(file, original, { flag: 'r+' })
  }

  const rollout = keys.rollouts(RUN, 1, 0)
  const finalCheckpoint = keys.checkpoint(RUN, 1, 'model.safetensors')

  it('passes an intact run, having re-hashed its artifacts', async () => {
    const checked = await verifyRun(store, RUN)
    assert.deepEqual(checked.damaged, [])
    assert.ok(checked.artifacts > 10 && checked.bytes > 0, JSON.stringify(checked))
    assert.equal(micro.checkpoints.length, 2)
  })

  it('names a damaged rollout and the damaged final checkpoint together, though the store heads still agree', async () => {
    const undo = [await flipBit(rollout), await flipBit(finalCheckpoint)]
    try {
      const recorded = await store.head(finalCheckpoint)
      assert.equal(recorded?.sha256, micro.checkpoints[1]?.sha256, "a head answers the store's record")
      const checked = await verifyRun(store, RUN)
      assert.deepEqual([...new Set(checked.damaged.map((d) => d.key))].sort(), [finalCheckpoint, rollout].sort())
      assert.ok(checked.damaged.every((d) => d.kind === 'hash' || d.kind === 'unreadable'))
      // the activity: non-retryable, one failure naming both, with what to do
      await assert.rejects(acts.verifyRun({ run: micro.run }), (e: Error) => {
        assert.ok(e instanceof ApplicationFailure)
        assert.equal(e.type, 'CorruptArtifact')
        assert.equal(e.nonRetryable, true)
        assert.match(e.message, /run verify-run: 2 stored artifacts it would reuse are damaged/)
        assert.ok(e.message.includes(rollout) && e.message.includes(finalCheckpoint), e.message)
        assert.match(e.message, /restore them from a backup and retry/)
        return true
      })
    } finally {
      for (const u of undo) await u()
    }
    assert.deepEqual((await verifyRun(store, RUN)).damaged, [])
  })

  it('does not count a deleted output as damage: the phase that wrote it computes it again', async () => {
    const bytes = await store.get(rollout)
    await store.delete(rollout)
    try {
      assert.deepEqual((await verifyRun(store, RUN)).damaged, [])
    } finally {
      await store.put(rollout, bytes)
    }
  })

  it('names a damaged run.json', async () => {
    const undo = await flipBit(keys.runRecord(RUN))
    try {
      const checked = await verifyRun(store, RUN)
      assert.deepEqual(
        checked.damaged.map((d) => d.key),
        [keys.runRecord(RUN)],
      )
    } finally {
      await undo()
    }
  })
})
