// `seedflow audit` after a real finished micro seedRun (real dev server, real S3 store; 2 iterations, only the
// final one evaluated, retention keeping the last checkpoint, so iteration 0's checkpoint is pruned): the audit
// passes and lists the pruned checkpoint as pruned; after one byte of one artifact changes it fails, naming it.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { LOCAL_S3_CREDENTIALS, LOCAL_S3_REGION } from '../../infra/s3-server.ts'
import { keys } from '../../store/keys.ts'
import type { S3ArtifactStore } from '../../store/s3-store.ts'
import { seedflow } from '../cli/seedflow-process.ts'
import { microConfig } from '../compute/micro.ts'
import { type PipelineHarness, startPipeline } from './pipeline-harness.ts'
import { testServers } from './servers.ts'

const PREFIX = `audit-${process.pid}`
const RUN_ID = `audit-${process.pid}`

describe('seedflow audit after a finished run (real dev server, S3 store)', () => {
  let harness: PipelineHarness
  let store: S3ArtifactStore
  let env: NodeJS.ProcessEnv

  before(async () => {
    harness = await startPipeline(PREFIX)
    store = harness.store
    const { s3Endpoint, s3Bucket } = testServers()
    env = {
      SEEDFLOW_S3_BUCKET: s3Bucket,
      SEEDFLOW_S3_ENDPOINT: s3Endpoint,
      SEEDFLOW_S3_PREFIX: PREFIX,
      AWS_REGION: LOCAL_S3_REGION,
      AWS_ACCESS_KEY_ID: LOCAL_S3_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: LOCAL_S3_CREDENTIALS.secretAccessKey,
    }
    const c = microConfig('seed')
    await harness.run(RUN_ID, {
      ...c,
      stage2: { ...c.stage2, iterations: 2 },
      evaluation: { ...c.evaluation, tasks: 2, every: 0 },
      retention: { ...c.retention, keepLast: 1 },
    })
  })

  after(async () => {
    await harness?.close()
  })

  it('passes, and reports the pruned checkpoint of iteration 0 as pruned', async () => {
    assert.equal(await store.head(keys.checkpoint(RUN_ID, 0, 'model.safetensors')), undefined, 'pruned')
    const r = await seedflow(['audit', RUN_ID], env)
    assert.equal(r.code, 0, `${r.out}\n${r.err}`)
    assert.match(r.out, /manifests: \d+ phase, 2 iteration, 1 retention/)
    assert.match(r.out, /pruned: 4 \(/)
    for (const file of ['config.json', 'model.safetensors', 'optimizer.safetensors', 'tokenizer.json'])
      assert.ok(
        r.out.includes(`    ${keys.checkpoint(RUN_ID, 0, file as 'config.json')}: retention after iteration 1: `),
        r.out,
      )
    assert.match(r.out, /broken: 0\n/)
    assert.match(r.out, new RegExp(`audit of run ${RUN_ID} passed`))
  })

  it('names the broken artifact after one byte of it changes, with its manifest and both hashes', async () => {
    const key = keys.rollouts(RUN_ID, 1, 0)
    const original = await store.get(key)
    const expected = (await store.head(key))?.sha256
    const changed = Buffer.from(original)
    changed[changed.length - 1] = (changed[changed.length - 1] as number) ^ 0x20
    const actual = (await store.put(key, changed)).sha256
    try {
      const r = await seedflow(['audit', RUN_ID], env)
      assert.equal(r.code, 1, r.out)
      assert.ok(
        r.err.includes(
          `the first: hash ${key} (expected sha256 ${expected}, actual ${actual}), referenced by ${keys.phaseManifest(RUN_ID, 1, 'rollout', 0)}`,
        ),
        r.err,
      )
    } finally {
      await store.put(key, original)
    }
    assert.equal((await seedflow(['audit', RUN_ID], env)).code, 0, 'restored')
  })

  it('lists a deleted plan.json and a damaged retention record, and still prints its summary', async () => {
    const plan = keys.runPlan(RUN_ID)
    const record = keys.retentionRecord(RUN_ID, 1)
    const [planBytes, recordBytes] = [await store.get(plan), await store.get(record)]
    await store.delete(plan)
    await store.put(record, Buffer.from('{"artifacts": '))
    try {
      const r = await seedflow(['audit', RUN_ID], env)
      assert.equal(r.code, 1, r.out)
      assert.ok(r.out.includes(`    missing ${plan} (in ${plan}): `), r.out)
      assert.ok(r.out.includes(`    unreadable ${record} (in ${record}): ${record}: `), r.out)
      // what the unreadable record pruned is gone with no readable record saying so: listed, with that caveat
      assert.ok(r.out.includes(`(or pruned: ${record} cannot be read, and may list it)`), r.out)
      assert.match(r.out, /broken: 6\n/)
      assert.match(r.out, /manifests: \d+ phase, 2 iteration, 1 retention/)
    } finally {
      await store.put(plan, planBytes)
      await store.put(record, recordBytes)
    }
    assert.equal((await seedflow(['audit', RUN_ID], env)).code, 0, 'restored')
  })
})
