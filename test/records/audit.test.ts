// Audit on a micro run written to a folder store by the real pipeline activities (3 iterations, evaluated after
// iterations 1 and 2, retention keeping only the last checkpoint): the lineage the manifests record, a clean audit
// that tells pruned from broken, and each kind of damage named with its manifest and hashes. `seedflow audit`
// itself runs once on the clean run and once on a damaged one.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { ApplicationFailure } from '@temporalio/common'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { auditRun } from '../../records/audit.ts'
import type { PipelineActivities } from '../../records/contracts.ts'
import { recordHyperparameters } from '../../records/hyperparameters.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { sha256Hex } from '../../store/hash.ts'
import { canonicalJson, getJson, putJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import type { Manifest } from '../../store/manifest.ts'
import { type MicroRun, runMicro } from '../activities/micro-run.ts'
import { seedflow } from '../cli/seedflow-process.ts'
import { microConfig } from '../compute/micro.ts'

const RUN = 'audit-run'
const engine = createLocalEngine({ threads: 1 })

function config() {
  const c = microConfig('seed')
  return {
    ...c,
    stage2: { ...c.stage2, iterations: 3 },
    evaluation: { ...c.evaluation, tasks: 2, every: 2 },
    retention: { ...c.retention, keepLast: 1 },
  }
}

describe('audit of a micro run (folder store, real pipeline activities)', () => {
  let root: string
  let store: FsArtifactStore
  let acts: PipelineActivities
  let micro: MicroRun

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-audit-'))
    store = new FsArtifactStore(root)
    acts = createPipelineActivities({ store, engine })
    micro = await runMicro(acts, RUN, config())
  })

  after(async () => {
    await engine.close()
    await rm(root, { recursive: true, force: true })
  })

  /** Runs `damage`, audits, then undoes it whatever happened. */
  async function auditDamaged(damage: () => Promise<() => Promise<void>>) {
    const undo = await damage()
    try {
      return await auditRun(store, RUN)
    } finally {
      await undo()
    }
  }

  it('records the lineage: checkpoint ← rollouts ← snapshot ← previous checkpoint; skills ← rollouts + analyzing checkpoint', async () => {
    const manifest = (await getJson(store, keys.iterationManifest(RUN, 1))) as Manifest
    const parents = (key: string) => manifest.artifacts[key]?.parents ?? []
    const previous = `${micro.checkpoints[0]?.prefix}model.safetensors`
    assert.ok(parents(keys.checkpoint(RUN, 1, 'model.safetensors')).includes(keys.rollouts(RUN, 1, 0)))
    assert.ok(parents(keys.rollouts(RUN, 1, 0)).includes(keys.snapshot(RUN, 1)))
    assert.ok(parents(keys.snapshot(RUN, 1)).includes(previous), `snapshot parents: ${parents(keys.snapshot(RUN, 1))}`)
    assert.deepEqual(
      parents(keys.skills(RUN, 1, 0)),
      [keys.rollouts(RUN, 1, 0), previous, keys.snapshot(RUN, 1)].sort(),
    )
    const entry = manifest.artifacts[keys.rollouts(RUN, 1, 0)]
    assert.equal(entry?.sha256, (await store.head(keys.rollouts(RUN, 1, 0)))?.sha256)
    assert.equal(entry?.bytes, (await store.head(keys.rollouts(RUN, 1, 0)))?.bytes)
    assert.equal(manifest.configSha256, micro.run.configSha256)
    assert.match(manifest.seedflowVersion, /^\d+\.\d+\.\d+/)
  })

  it('passes on the finished run and reports the pruned checkpoints as pruned', async () => {
    const report = await auditRun(store, RUN)
    assert.deepEqual(report.broken, [])
    assert.deepEqual(report.manifests, { phase: 24, iteration: 3, retention: 2 })
    assert.ok(report.artifacts > 50 && report.bytes > 0 && report.links > 100)
    // not evaluated and not the last: iteration 0's checkpoint; evaluated but not the last: iteration 1's optimizer
    assert.deepEqual(
      report.pruned.map((p) => p.key),
      [
        ...['config.json', 'model.safetensors', 'optimizer.safetensors', 'tokenizer.json'].map((f) =>
          keys.checkpoint(RUN, 0, f as 'config.json'),
        ),
        keys.checkpoint(RUN, 1, 'optimizer.safetensors'),
      ],
    )
    assert.match(report.pruned[0]?.pruned.reason ?? '', /retention after iteration 1: .*not evaluated/)
    assert.equal(report.configSha256, micro.run.configSha256)
  })

  it('names the first broken artifact after one byte of it changes on disk: key, manifest, expected and actual sha256', async () => {
    const key = keys.rollouts(RUN, 1, 0)
    const expected = (await store.head(key))?.sha256
    const report = await auditDamaged(async () => {
      const path = join(root, key)
      const original = await readFile(path)
      const flipped = Buffer.from(original)
      flipped[10] = (flipped[10] as number) ^ 1
      await writeFile(path, flipped)
      return () => writeFile(path, original)
    })
    const first = report.broken[0]
    assert.equal(first?.kind, 'hash')
    assert.equal(first?.key, key)
    assert.equal(first?.manifest, keys.phaseManifest(RUN, 1, 'rollout', 0))
    assert.equal(first?.expected, expected)
    assert.ok(first?.actual && first.actual !== expected)
    assert.equal(report.broken.length, 1, 'one broken artifact, however many manifests list it')
    assert.deepEqual((await auditRun(store, RUN)).broken, [], 'restored')
  })

  it('an artifact replaced through the store (its own record updated) is still broken against its manifest', async () => {
    const key = keys.skills(RUN, 2, 0)
    const report = await auditDamaged(async () => {
      const original = await store.get(key)
      await store.put(key, Buffer.concat([original, Buffer.from('\n')]))
      return async () => {
        await store.put(key, original)
      }
    })
    assert.deepEqual(
      report.broken.map((p) => [p.kind, p.key, p.manifest]),
      [['hash', key, keys.phaseManifest(RUN, 2, 'analyze', 0)]],
    )
  })

  it('an artifact deleted without a retention record is missing, not pruned', async () => {
    const key = keys.checkpoint(RUN, 2, 'tokenizer.json')
    const report = await auditDamaged(async () => {
      const original = await store.get(key)
      await store.delete(key)
      return async () => {
        await store.put(key, original)
      }
    })
    assert.deepEqual(
      report.broken.map((p) => [p.kind, p.key, p.manifest]),
      [['missing', key, keys.phaseManifest(RUN, 2, 'update', 0)]],
    )
    assert.equal(report.pruned.length, 5)
  })

  it('a parent link that resolves to nothing is broken, naming the manifest', async () => {
    const key = keys.iterationManifest(RUN, 2)
    const report = await auditDamaged(async () => {
      const original = await store.get(key)
      const manifest = JSON.parse(original.toString('utf8')) as Manifest
      const entry = manifest.artifacts[keys.rescore(RUN, 2, 0)]
      entry?.parents.push(`runs/${RUN}/iterations/0002/rollouts/0009.jsonl.gz`)
      await putJson(store, key, manifest)
      return async () => {
        await store.put(key, original)
      }
    })
    assert.equal(report.broken.length, 1)
    assert.equal(report.broken[0]?.kind, 'link')
    assert.equal(report.broken[0]?.manifest, key)
    assert.match(report.broken[0]?.message ?? '', /parent runs\/audit-run\/iterations\/0002\/rollouts\/0009\.jsonl\.gz/)
  })

  it('a phase input whose sha256 no artifact of the run has is a broken link', async () => {
    const key = keys.phaseManifest(RUN, 2, 'rescore', 0)
    const report = await auditDamaged(async () => {
      const original = await store.get(key)
      const manifest = JSON.parse(original.toString('utf8')) as { inputs: Record<string, string> }
      manifest.inputs.snapshot = 'a'.repeat(64)
      await putJson(store, key, manifest)
      return async () => {
        await store.put(key, original)
      }
    })
    // one problem per artifact: the changed manifest's bytes (the iteration manifest's record) are not reported again
    assert.deepEqual(
      report.broken.map((p) => [p.kind, p.key]),
      [['link', key]],
    )
    assert.match(report.broken[0]?.message ?? '', /input snapshot has sha256 a{64}, which no artifact of the run has/)
  })

  it('warns of a config hash that nothing explains, until a hyperparameter change records it', async () => {
    const key = keys.stagePhaseManifest(RUN, 'evaluate', 0)
    const change = {
      seq: 0,
      source: 'setHyperparameters' as const,
      iteration: 2,
      phase: 'iteration',
      overrides: { stage2: { lr: 1e-4 } },
      cumulative: { stage2: { lr: 1e-4 } },
      at: new Date(0).toISOString(),
    }
    const withHash = async (configSha256: string, record: boolean) =>
      auditDamaged(async () => {
        const original = await store.get(key)
        await putJson(store, key, { ...JSON.parse(original.toString('utf8')), configSha256 })
        // the writer the workflow's setHyperparameters uses: the effective config and the change record
        const recorded = record ? await recordHyperparameters(store, { run: micro.run, change }) : undefined
        return async () => {
          await store.put(key, original)
          if (recorded) {
            await store.delete(recorded.record.key)
            await store.delete(keys.effectiveConfig(RUN, recorded.run.configSha256))
          }
        }
      })
    const unexplained = await withHash('d'.repeat(64), false)
    assert.deepEqual(unexplained.unexplainedConfigHashes, ['d'.repeat(64)])
    assert.deepEqual(unexplained.broken, [], 'a warning, not a broken artifact')
    // the hash the change makes: the run's config with stage2.lr = 1e-4
    const config = structuredClone(
      (await getJson(store, keys.runRecord(RUN))) as { config: { stage2: { lr: number } } },
    ).config
    config.stage2.lr = 1e-4
    const changed = sha256Hex(Buffer.from(canonicalJson(config)))
    const explained = await withHash(changed, true)
    assert.deepEqual(explained.unexplainedConfigHashes, [])
    assert.deepEqual(
      explained.hyperparameterChanges.map((c) => [c.seq, c.iteration, c.overrides, c.configSha256]),
      [[0, 2, { stage2: { lr: 1e-4 } }, changed]],
    )
  })

  it('a finished phase whose outputs retention pruned is reused, and its iteration record stays the same', async () => {
    const snapshot = { key: keys.snapshot(RUN, 0), ...(await headOf(keys.snapshot(RUN, 0))) }
    const rollouts = [0].map((shard) => ({ key: keys.rollouts(RUN, 0, shard) }))
    const update = (await getJson(store, keys.phaseManifest(RUN, 0, 'update', 0))) as { inputs: Record<string, string> }
    const rescore = { key: keys.rescore(RUN, 0, 0), ...(await headOf(keys.rescore(RUN, 0, 0))) }
    const again = await acts.update({
      run: micro.run,
      iteration: 0,
      snapshot,
      rollouts: await Promise.all(rollouts.map(async (r) => ({ ...r, ...(await headOf(r.key)) }))),
      rescore,
    })
    assert.equal(update.inputs.snapshot, snapshot.sha256)
    assert.equal(again.reused, true)
    assert.equal(again.checkpoint.sha256, micro.checkpoints[0]?.sha256)
    assert.equal(await store.head(keys.checkpoint(RUN, 0, 'model.safetensors')), undefined, 'still pruned')
  })

  it('a reader handed a sha256 that the artifact no longer has fails with IntegrityError naming the key', async () => {
    const snapshot = { key: keys.snapshot(RUN, 2), ...(await headOf(keys.snapshot(RUN, 2))) }
    const key = keys.rollouts(RUN, 2, 0)
    const stale = { key, sha256: 'c'.repeat(64), bytes: 1 }
    const error = await acts.analyze({ run: micro.run, iteration: 9, shard: 0, snapshot, rollouts: stale }).then(
      () => undefined,
      (e: unknown) => e,
    )
    assert.ok(error instanceof ApplicationFailure, String(error))
    assert.equal(error.type, 'IntegrityError')
    assert.equal(error.nonRetryable, true)
    assert.ok(error.message.includes(key) && error.message.includes('c'.repeat(64)), error.message)
  })

  it('seedflow audit: exit 0 with the summary on the finished run, exit 1 naming the first broken artifact', async () => {
    const env = { SEEDFLOW_ARTIFACTS_DIR: root, SEEDFLOW_S3_BUCKET: '' }
    const ok = await seedflow(['audit', RUN], env)
    assert.equal(ok.code, 0, `${ok.out}\n${ok.err}`)
    assert.match(ok.out, /pruned: 5 \(/)
    assert.match(ok.out, /broken: 0\n/)
    assert.match(ok.out, /audit of run audit-run passed/)
    const key = keys.metrics(RUN, 1)
    const path = join(root, key)
    const original = await readFile(path)
    await writeFile(path, Buffer.from(original.toString('utf8').replace('"iteration": 1', '"iteration": 7')))
    try {
      const bad = await seedflow(['audit', RUN], env)
      assert.equal(bad.code, 1)
      assert.ok(
        bad.err.includes(`the first: hash ${key}`) &&
          bad.err.includes(`referenced by ${keys.phaseManifest(RUN, 1, 'metrics', 0)}`),
        bad.err,
      )
    } finally {
      await writeFile(path, original)
    }
    const unknown = await seedflow(['audit', 'no-such-run'], env)
    assert.equal(unknown.code, 1)
    assert.match(unknown.err, /seedflow: unknown run no-such-run: no runs\/no-such-run\/run\.json/)
  })

  /** Flips one bit of the file of `key` in place (same size); returns the undo. */
  async function flipBit(key: string, at = 10): Promise<() => Promise<void>> {
    const path = join(root, key)
    const original = await readFile(path)
    const flipped = Buffer.from(original)
    flipped[at] = (flipped[at] as number) ^ 1
    await writeFile(path, flipped, { flag: 'r+' })
    return () => writeFile(path, original, { flag: 'r+' })
  }

  it('a corrupt retention record and a corrupt checkpoint: seedflow audit lists both and prints its summary', async () => {
    const record = keys.retentionRecord(RUN, 1)
    const checkpoint = keys.checkpoint(RUN, 2, 'model.safetensors')
    const undoRecord = await flipBit(record, 5)
    const undoCheckpoint = await flipBit(checkpoint, 100)
    try {
      const report = await auditRun(store, RUN)
      // what the unreadable record pruned is gone with no readable record saying so: missing, with that caveat
      const pruned = ['model.safetensors', 'config.json', 'tokenizer.json', 'optimizer.safetensors'].map((f) =>
        keys.checkpoint(RUN, 0, f as 'config.json'),
      )
      assert.deepEqual(
        report.broken.map((p) => [p.kind, p.key]),
        [...pruned.map((key) => ['missing', key]), ['hash', checkpoint], ['unreadable', record]],
      )
      assert.equal(
        report.broken[0]?.message,
        `${pruned[0]} is missing (or pruned: ${record} cannot be read, and may list it)`,
      )
      assert.match(report.broken[5]?.message ?? '', /integrity check failed for runs\/audit-run\/retention\/0001\.json/)
      const r = await seedflow(['audit', RUN], { SEEDFLOW_ARTIFACTS_DIR: root, SEEDFLOW_S3_BUCKET: '' })
      assert.equal(r.code, 1, `${r.out}\n${r.err}`)
      assert.match(r.out, /manifests: 24 phase, 3 iteration, 2 retention/)
      assert.match(r.out, /broken: 6\n/)
      assert.ok(r.out.includes(`    hash ${checkpoint} (in ${keys.phaseManifest(RUN, 2, 'update', 0)}): `), r.out)
      assert.ok(r.out.includes(`    unreadable ${record} (in ${record}): `), r.out)
      assert.ok(r.err.includes(`audit of run ${RUN} failed: 6 broken; the first: missing ${pruned[0]}`), r.err)
    } finally {
      await undoRecord()
      await undoCheckpoint()
    }
  })

  it('a damaged checksum record does not stop the audit: the artifact the store refuses to read is listed', async () => {
    const key = keys.rollouts(RUN, 2, 0)
    const sidecar = join(root, '.seedflow-meta', `${key}.${(await stat(join(root, key))).ino}.json`)
    const report = await auditDamaged(async () => {
      const original = await readFile(sidecar)
      await writeFile(sidecar, '{"sha256": "0')
      return () => writeFile(sidecar, original)
    })
    assert.deepEqual(
      report.broken.map((p) => [p.kind, p.key, p.manifest]),
      [['unreadable', key, keys.phaseManifest(RUN, 2, 'rollout', 0)]],
    )
    assert.match(report.broken[0]?.message ?? '', /the store refuses to read them: .*checksum record .* is damaged/)
  })

  it('a corrupt plan.json is listed with both hashes', async () => {
    const key = keys.runPlan(RUN)
    const expected = (await store.head(key))?.sha256
    const report = await auditDamaged(() => flipBit(key, 3))
    assert.deepEqual(
      report.broken.map((p) => [p.kind, p.key, p.manifest, p.expected]),
      [['hash', key, key, expected]],
    )
    assert.ok(report.broken[0]?.actual && report.broken[0].actual !== expected)
  })

  it('a deleted plan.json is listed as missing', async () => {
    const key = keys.runPlan(RUN)
    const report = await auditDamaged(async () => {
      const original = await store.get(key)
      await store.delete(key)
      return async () => {
        await store.put(key, original)
      }
    })
    assert.deepEqual(
      report.broken.map((p) => [p.kind, p.key]),
      [['missing', key]],
    )
  })

  it('a cp -a copy of the store audits clean, and a flipped bit in the copy is caught', async () => {
    const copy = `${root}-copy`
    await promisify(execFile)('cp', ['-a', root, copy])
    try {
      const key = keys.rollouts(RUN, 1, 0)
      assert.notEqual((await stat(join(copy, key))).ino, (await stat(join(root, key))).ino, 'a new inode')
      const copied = new FsArtifactStore(copy)
      const report = await auditRun(copied, RUN)
      const original = await auditRun(store, RUN)
      assert.deepEqual(report.broken, [])
      assert.deepEqual(
        [report.manifests, report.artifacts, report.bytes, report.pruned.length],
        [original.manifests, original.artifacts, original.bytes, original.pruned.length],
      )
      const path = join(copy, key)
      const bytes = await readFile(path)
      bytes[10] = (bytes[10] as number) ^ 1
      await writeFile(path, bytes, { flag: 'r+' })
      const damaged = await auditRun(copied, RUN)
      assert.deepEqual(
        damaged.broken.map((p) => [p.kind, p.key]),
        [['hash', key]],
      )
    } finally {
      await rm(copy, { recursive: true, force: true })
    }
  })

  async function headOf(key: string) {
    const head = await store.head(key)
    assert.ok(head, key)
    return { sha256: head.sha256, bytes: head.bytes }
  }
})
