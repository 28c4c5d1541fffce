import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, afterEach, before, describe, it } from 'node:test'
import { runPhase } from '../../activities/phase.ts'
import type { ArtifactStore } from '../../store/artifact-store.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { keys } from '../../store/keys.ts'
import {
  armedFaults,
  FaultInjected,
  parseFaults,
  phaseFaultHooks,
  rearmFaults,
  withStoreFaults,
} from '../../workers/faults.ts'

describe('SEEDFLOW_FAULT', () => {
  it('parses phase and store faults with their filters and actions', () => {
    assert.deepEqual(parseFaults('rollout:mid-work:1, update:after-manifest:throw,store:before-put:checkpoint/'), [
      { site: 'rollout', point: 'mid-work', filter: '1', action: 'kill', spec: 'rollout:mid-work:1' },
      { site: 'update', point: 'after-manifest', action: 'throw', spec: 'update:after-manifest:throw' },
      {
        site: 'store',
        point: 'before-put',
        filter: 'checkpoint/',
        action: 'kill',
        spec: 'store:before-put:checkpoint/',
      },
    ])
  })

  it('lists every bad entry', () => {
    assert.throws(
      () => parseFaults('rollout:mid-wok,shop:mid-work,store:mid-work,rollout:mid-work:x'),
      (e: Error) =>
        e.message ===
        [
          'SEEDFLOW_FAULT is invalid:',
          "  rollout:mid-wok: unknown point 'mid-wok' (mid-work, after-manifest)",
          "  shop:mid-work: unknown site 'shop' (store or a phase: snapshot, rollout, analyze, rescore, update, evaluate, metrics, sft, warmstart, import, annotate, fork)",
          "  store:mid-work: unknown point 'mid-work' (before-put, after-put, mid-multipart)",
          "  rollout:mid-work:x: the shard must be a non-negative integer, got 'x'",
        ].join('\n'),
    )
  })

  it('arms nothing when unset', () => {
    rearmFaults('')
    assert.deepEqual(armedFaults(), [])
  })
})

describe('fault points (throwing faults, filesystem store)', () => {
  let root: string
  let store: ArtifactStore
  const run = 'faults'
  const spec = { configSha256: 'c'.repeat(64), inputs: {} }
  const scope = (shard: number) => ({ runId: run, phase: 'rollout' as const, shard, iteration: 0 })
  const body = (shard: number) => async () => ({
    outputs: {
      rollouts: await store.put(keys.rollouts(run, 0, shard), Buffer.from(`shard ${shard}`)),
      other: await store.put(`runs/${run}/other-${shard}`, Buffer.from('x')),
    },
    stats: {},
  })

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-faults-'))
    store = withStoreFaults(new FsArtifactStore(root)) // as a worker's composition root wires them
  })
  afterEach(() => rearmFaults(''))
  after(() => rm(root, { recursive: true, force: true }))

  it('mid-work fires after the phase body wrote its first output, once, and only for its shard', async () => {
    rearmFaults('rollout:mid-work:1:throw')
    await runPhase({ store, hooks: phaseFaultHooks }, scope(0), spec, body(0))
    await assert.rejects(runPhase({ store, hooks: phaseFaultHooks }, scope(1), spec, body(1)), FaultInjected)
    assert.ok(await store.head(keys.rollouts(run, 0, 1)), 'the first output was written')
    assert.equal(await store.head(`runs/${run}/other-1`), undefined, 'the body stopped there')
    assert.equal(await store.head(keys.phaseManifest(run, 0, 'rollout', 1)), undefined)
    const retried = await runPhase({ store, hooks: phaseFaultHooks }, scope(1), spec, body(1))
    assert.equal(retried.reused, false)
    assert.equal(retried.attempt, 0)
  })

  it('after-manifest fires once the manifest is written; the retry reuses it', async () => {
    rearmFaults('rollout:after-manifest:throw')
    await assert.rejects(runPhase({ store, hooks: phaseFaultHooks }, scope(2), spec, body(2)), FaultInjected)
    assert.ok(await store.head(keys.phaseManifest(run, 0, 'rollout', 2)))
    const retried = await runPhase({ store, hooks: phaseFaultHooks }, scope(2), spec, body(2))
    assert.equal(retried.reused, true)
  })

  it('a store fault fires on the keys it names, before anything is written', async () => {
    rearmFaults('store:before-put:checkpoint/:throw')
    await store.put(`runs/${run}/a`, Buffer.from('a'))
    await assert.rejects(store.put(`runs/${run}/checkpoint/model.safetensors`, Buffer.from('m')), FaultInjected)
    assert.equal(await store.head(`runs/${run}/checkpoint/model.safetensors`), undefined)
  })
})
