// Policies that stay loaded in a worker between activities (activities/resident-policies.ts): the rescore and
// update of iteration k + 1 take the policy that iteration k's update kept, so they read none of its checkpoint
// from the store (counted by store/read-counts.ts), and the run's checkpoints are the bytes of a run whose every
// phase loads from the store.
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import { ResidentPolicies } from '../../activities/resident-policies.ts'
import { createLocalEngine } from '../../engine/index.ts'
import type { CheckpointRef, PipelineActivities } from '../../records/contracts.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { type ReadCountingStore, withReadCounts } from '../../store/read-counts.ts'
import { microConfig } from '../compute/micro.ts'
import { iterateMicro } from './micro-run.ts'

const engine = createLocalEngine({ threads: 1 })
const roots: string[] = []

after(async () => {
  await engine.close()
  await Promise.all(roots.map((r) => rm(r, { recursive: true, force: true })))
})

interface Lane {
  store: ReadCountingStore
  acts: PipelineActivities
  resident: ResidentPolicies
}

async function lane(capacity: number): Promise<Lane> {
  const root = await mkdtemp(join(tmpdir(), 'seedflow-resident-'))
  roots.push(root)
  const store = withReadCounts(new FsArtifactStore(root))
  const resident = new ResidentPolicies(capacity)
  return { store, resident, acts: createPipelineActivities({ store, engine, resident }) }
}

/** Bytes read from the store under a checkpoint folder since the last reset. */
function readUnder(store: ReadCountingStore, ref: CheckpointRef): number {
  let bytes = 0
  for (const [key, r] of store.reads) if (key.startsWith(ref.prefix)) bytes += r.bytes
  return bytes
}

/**
 * A micro seed run of two iterations through the activities; before the rescore and update of iteration 1 the
 * read counters are reset, and what those two phases read of iteration 0's checkpoint is returned.
 */
async function twoIterations(l: Lane) {
  const config = microConfig('seed')
  const { run, plan } = await l.acts.planRun({
    runId: 'resident',
    config: { ...config, stage2: { ...config.stage2, iterations: 2 } },
  })
  const base = (await l.acts.prepare({ run })).checkpoint
  const stage1 = (await l.acts.stage1({ run, base })).checkpoint
  const first = await iterateMicro(l.acts, run, plan, 0, { acting: stage1, reference: stage1, analyzer: stage1 })
  const acting = first.updated.checkpoint
  // iteration 1 as seedIteration orders it, the counters reset after the rollouts and analyses
  const weights = { acting, reference: stage1, analyzer: acting }
  const snapshot = await l.acts.snapshot({ run, iteration: 1, ...weights })
  const rollouts = []
  for (let shard = 0; shard < plan.shards; shard++) {
    const r = await l.acts.rollout({ run, iteration: 1, shard, snapshot })
    rollouts.push(r.outputs.rollouts!)
  }
  const skills = []
  for (const [shard, ref] of rollouts.entries())
    skills.push((await l.acts.analyze({ run, iteration: 1, shard, snapshot, rollouts: ref })).outputs.skills!)
  l.store.resetReads()
  const hitsBefore = l.resident.stats.hits
  const scored = await l.acts.rescore({ run, iteration: 1, snapshot, rollouts, skills })
  const updated = await l.acts.update({ run, iteration: 1, snapshot, rollouts, rescore: scored.outputs.rescore! })
  return {
    actingRead: readUnder(l.store, acting),
    hits: l.resident.stats.hits - hitsBefore,
    final: updated.checkpoint,
    first: acting,
  }
}

describe('resident policies', () => {
  it("take iteration k's updated policy in iteration k + 1's rescore and update, reading none of it, with the same bytes", async () => {
    const kept = await twoIterations(await lane(2))
    const loaded = await twoIterations(await lane(0))
    assert.equal(kept.actingRead, 0, 'the resident rescore and update read nothing of the acting checkpoint')
    assert.ok(loaded.actingRead > 0, `without residency they read it (${loaded.actingRead} bytes)`)
    assert.equal(kept.hits, 2, 'rescore and update both took the resident policy')
    assert.equal(kept.first.sha256, loaded.first.sha256, "iteration 0's checkpoint is the same")
    assert.equal(kept.final.sha256, loaded.final.sha256, "iteration 1's checkpoint is the same bytes")
  })

  it('keeps at most its capacity, releasing the least recently kept', async () => {
    const resident = new ResidentPolicies(1)
    const released: string[] = []
    const policy = (name: string) =>
      ({ trainer: { release: async () => void released.push(name) } }) as unknown as Parameters<
        ResidentPolicies['keep']
      >[1]['policy']
    await resident.keep('a', { policy: policy('a') })
    await resident.keep('b', { policy: policy('b') })
    assert.deepEqual(released, ['a'])
    assert.equal(resident.take('a'), undefined)
    assert.ok(resident.take('b'))
    assert.equal(resident.size, 0)
    assert.deepEqual(resident.stats, { hits: 1, misses: 1, kept: 2, evicted: 1 })
  })
})
