// Retention: which checkpoints stay for a given evaluation history (the plan alone), and, on a folder store
// holding a hand-made run (iteration manifests listing small checkpoint files, evaluate manifests with success),
// that every deletion is recorded before it happens and that a pass cut short is finished by the next one.
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { applyRetention, type CheckpointHistory, planRetention } from '../../activities/retention.ts'
import { auditRun } from '../../records/audit.ts'
import { RETENTION_DEFAULTS, type RetentionConfig } from '../../seed/config.ts'
import type { ArtifactStore } from '../../store/artifact-store.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { sha256Hex } from '../../store/hash.ts'
import { canonicalJson, getJson, putJson } from '../../store/json.ts'
import { CHECKPOINT_FILES, keys } from '../../store/keys.ts'
import { type Manifest, manifestEntry } from '../../store/manifest.ts'
import { readPruned } from '../../store/pruned.ts'

const policy = (overrides: Partial<RetentionConfig> = {}): RetentionConfig => ({ ...RETENTION_DEFAULTS, ...overrides })
const history = (...success: Array<number | null>): CheckpointHistory[] =>
  success.map((s, iteration) => ({ iteration, success: s }))
const pruned = (h: CheckpointHistory[], p: RetentionConfig) => planRetention(h, p).prune.map((x) => x.iteration)
const optimizerDropped = (h: CheckpointHistory[], p: RetentionConfig) =>
  planRetention(h, p).dropOptimizer.map((x) => x.iteration)

describe('retention plan', () => {
  it('keeps the last N, the best and every evaluated checkpoint by default', () => {
    // evaluated: 1 (0.2), 4 (0.6); last 3: 5, 6, 7
    const h = history(null, 0.2, null, null, 0.6, null, null, null)
    assert.deepEqual(pruned(h, policy()), [0, 2, 3])
  })

  it('without keepEvaluated, keeps only the best of the evaluated ones beside the last N', () => {
    const h = history(null, 0.2, null, null, 0.6, null, null, null)
    assert.deepEqual(pruned(h, policy({ keepEvaluated: false })), [0, 1, 2, 3])
  })

  it('the best is the earliest of equal successes', () => {
    const h = history(0.5, 0.5, null, null)
    assert.deepEqual(pruned(h, policy({ keepLast: 1, keepEvaluated: false })), [1, 2])
  })

  it('without keepBest or keepEvaluated, only the last N stay', () => {
    const h = history(0.9, null, 0.1, null)
    assert.deepEqual(pruned(h, policy({ keepLast: 2, keepBest: false, keepEvaluated: false })), [0, 1])
  })

  it('drops the optimizer state of every kept checkpoint but the newest', () => {
    const h = history(null, 0.2, null, null, 0.6, null, null, null)
    assert.deepEqual(optimizerDropped(h, policy()), [1, 4, 5, 6])
    assert.deepEqual(optimizerDropped(h, policy({ optimizerStateOnlyForLast: false })), [])
  })

  it('says why a checkpoint goes', () => {
    const plan = planRetention(history(null, 0.25, null, null), policy({ keepLast: 2 }))
    assert.deepEqual(plan.prune, [
      {
        iteration: 0,
        reason: 'not among the last 2 (iterations 2-3), not the best by evaluation (iteration 1: 0.25), not evaluated',
      },
    ])
  })
})

const RUN = 'retention-run'
const RUN_REF = { runId: RUN, configSha256: 'f'.repeat(64) }

/** The files of a hand-made checkpoint (a LoRA one: adapter/ and lora_base.safetensors too), sorted as keys sort. */
const STORED = CHECKPOINT_FILES.filter((f) => f !== 'tokenizer_config.json').sort()

/** A hand-made finished iteration: its checkpoint files, its manifest, and an evaluation when `success` is given. */
async function writeIteration(store: ArtifactStore, k: number, success: number | null): Promise<void> {
  const artifacts: Manifest['artifacts'] = {}
  for (const file of STORED) {
    const info = await store.put(keys.checkpoint(RUN, k, file), Buffer.from(`${file} of iteration ${k}`))
    artifacts[info.key] = manifestEntry(info)
  }
  const manifest: Manifest = {
    version: 1,
    runId: RUN,
    configSha256: RUN_REF.configSha256,
    seedflowVersion: 'test',
    createdAt: new Date(0).toISOString(),
    artifacts,
  }
  await putJson(store, keys.iterationManifest(RUN, k), manifest)
  if (success !== null) {
    await putJson(store, keys.phaseManifest(RUN, k, 'evaluate', 0), { stats: { success }, outputs: {}, inputs: {} })
  }
}

/** A store whose deletes fail until `allow` is set: a retention pass cut short after its record. */
class FailingDeletes extends FsArtifactStore {
  allow = false
  override async delete(key: string): Promise<void> {
    if (!this.allow) throw new Error(`delete ${key}: injected failure`)
    await super.delete(key)
  }
}

describe('retention on a folder store', () => {
  let root: string
  let store: FailingDeletes

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-retention-'))
    store = new FailingDeletes(root)
    await putJson(store, keys.runRecord(RUN), {
      runId: RUN,
      config: {},
      configSha256: sha256Hex(Buffer.from(canonicalJson({}))),
    })
    await putJson(store, keys.runPlan(RUN), { iterations: 4, shards: 1 }) // every run has one: audit checks it
  })

  after(() => rm(root, { recursive: true, force: true }))

  it('records what it prunes before deleting, so a pass cut short leaves a recorded deletion that the next pass finishes', async () => {
    for (const [k, success] of [
      [0, null],
      [1, 0.5],
      [2, null],
      [3, null],
    ] as const)
      await writeIteration(store, k, success)
    const p = policy({ keepLast: 2 })
    await assert.rejects(applyRetention({ store }, RUN_REF, 3, p), /injected failure/)
    const record = (await getJson(store, keys.retentionRecord(RUN, 3))) as Manifest
    assert.deepEqual(Object.keys(record.artifacts).sort(), [
      ...STORED.map((f) => keys.checkpoint(RUN, 0, f)),
      keys.checkpoint(RUN, 1, 'optimizer.safetensors'),
      keys.checkpoint(RUN, 2, 'optimizer.safetensors'),
    ])
    for (const entry of Object.values(record.artifacts))
      assert.match(entry.pruned?.reason ?? '', /^retention after iteration 3: /)
    assert.ok(await store.head(keys.checkpoint(RUN, 0, 'model.safetensors')), 'nothing deleted yet')
    assert.equal((await auditRun(store, RUN)).broken.length, 0, 'a recorded, not yet deleted blob is not broken')

    store.allow = true
    const finished = await applyRetention({ store }, RUN_REF, 3, p)
    assert.equal(finished.deleted.length, STORED.length + 2)
    assert.equal(await store.head(keys.checkpoint(RUN, 0, 'model.safetensors')), undefined)
    assert.ok(await store.head(keys.checkpoint(RUN, 1, 'model.safetensors')), 'evaluated: kept')
    assert.ok(await store.head(keys.checkpoint(RUN, 3, 'optimizer.safetensors')), 'the newest keeps its optimizer')
    const report = await auditRun(store, RUN)
    assert.deepEqual(report.broken, [])
    assert.deepEqual(report.pruned.map((x) => x.key).sort(), Object.keys(record.artifacts).sort())
  })

  it('a later pass prunes what became old and never lists an artifact twice', async () => {
    await writeIteration(store, 4, null)
    await applyRetention({ store }, RUN_REF, 4, policy({ keepLast: 2 }))
    const record = (await getJson(store, keys.retentionRecord(RUN, 4))) as Manifest
    assert.deepEqual(Object.keys(record.artifacts).sort(), [
      ...STORED.filter((f) => f !== 'optimizer.safetensors').map((f) => keys.checkpoint(RUN, 2, f)),
      keys.checkpoint(RUN, 3, 'optimizer.safetensors'),
    ])
    assert.equal((await readPruned(store, RUN)).size, STORED.length + 2 + STORED.length)
    assert.deepEqual((await applyRetention({ store }, RUN_REF, 4, policy({ keepLast: 2 }))).deleted, [], 'idempotent')
  })
})
