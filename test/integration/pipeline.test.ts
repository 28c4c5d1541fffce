// The whole seedRun with the real pipeline activities, on the real dev server and the real S3 store: a micro
// configuration (one-layer model, a few warm-start and SFT steps, 2 iterations of 2 shards) that does not need
// to learn, only to pass every phase through the store. A second run of the same run id reuses every manifest.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Client, Connection, WorkflowFailedError } from '@temporalio/client'
import { DefaultLogger, Runtime } from '@temporalio/worker'
import { PhaseCounters } from '../../activities/phase.ts'
import type { RunPlan } from '../../activities/pipeline-types.ts'
import { createLocalEngine, type Engine } from '../../engine/index.ts'
import { getJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import type { S3ArtifactStore } from '../../store/s3-store.ts'
import { createLocalWorker, type LocalWorker } from '../../workers/local.ts'
import { TASK_QUEUES } from '../../workers/task-queues.ts'
import { seedRun } from '../../workflows/index.ts'
import { microConfig } from '../activities/core/micro.ts'
import { testS3Store, testServers } from './servers.ts'

const RUN_ID = `pipeline-${process.pid}`

function config() {
  const c = microConfig('seed')
  return {
    ...c,
    stage2: { ...c.stage2, iterations: 2 },
    evaluation: { ...c.evaluation, tasks: 2, every: 1 },
  }
}

async function allKeys(store: S3ArtifactStore, prefix: string): Promise<string[]> {
  const out: string[] = []
  let cursor: string | undefined
  do {
    const page = await store.list(prefix, cursor ? { cursor } : {})
    out.push(...page.objects.map((o) => o.key))
    cursor = page.nextCursor
  } while (cursor)
  return out
}

describe('seedRun end to end with the pipeline activities (real dev server, S3 store)', () => {
  let store: S3ArtifactStore
  let engine: Engine
  let counters: PhaseCounters
  let local: LocalWorker
  let running: Promise<void>[]
  let connection: Connection
  let client: Client

  before(async () => {
    Runtime.install({ logger: new DefaultLogger('WARN') })
    const { temporalAddress } = testServers()
    store = testS3Store(`pipeline-${process.pid}`)
    engine = createLocalEngine({ threads: 1 })
    counters = new PhaseCounters()
    local = await createLocalWorker({
      connectionOptions: { address: temporalAddress },
      namespace: 'default',
      store,
      engine,
      counters,
      episodesPerShard: 2,
    })
    running = local.workers.map((w) => w.run())
    connection = await Connection.connect({ address: temporalAddress })
    client = new Client({ connection })
  })

  after(async () => {
    for (const w of local?.workers ?? []) w.shutdown()
    await Promise.all(running ?? [])
    await local?.close()
    await engine?.close()
    await connection?.close()
    store?.destroy()
  })

  it('runs prepare → Stage 1 → 2 iterations of 2 shards → evaluations, every phase manifest in the store', async () => {
    const result = await client.workflow.execute(seedRun, {
      taskQueue: TASK_QUEUES.control,
      workflowId: RUN_ID,
      args: [{ runId: RUN_ID, config: config() }],
      workflowExecutionTimeout: '10 minutes',
    })
    assert.deepEqual(
      result.evaluations.map((e) => [e.label, e.iteration]),
      [
        ['base', -1],
        ['stage 1', -1],
        ['iteration 0', 0],
        ['iteration 1', 1],
      ],
    )
    for (const e of result.evaluations) {
      assert.ok(e.success >= 0 && e.success <= 1, `${e.label}: success ${e.success}`)
      assert.ok(await store.head(e.manifestKey), `${e.manifestKey} exists`)
    }
    assert.ok(await store.head(keys.stageEvaluation(RUN_ID, 'base')))
    assert.ok(await store.head(keys.stageEvaluation(RUN_ID, 'stage1')))
    assert.ok(await store.head(keys.evaluation(RUN_ID, 1)))

    const plan = (await getJson(store, keys.runPlan(RUN_ID))) as RunPlan
    assert.equal(plan.shards, 2)
    const expected = [
      keys.stagePhaseManifest(RUN_ID, 'warmstart', 0),
      keys.stagePhaseManifest(RUN_ID, 'sft', 0),
      keys.stagePhaseManifest(RUN_ID, 'evaluate', 0),
      keys.stagePhaseManifest(RUN_ID, 'evaluate', 1),
    ]
    for (const k of [0, 1]) {
      expected.push(keys.phaseManifest(RUN_ID, k, 'snapshot', 0))
      for (const shard of [0, 1]) {
        expected.push(keys.phaseManifest(RUN_ID, k, 'rollout', shard))
        expected.push(keys.phaseManifest(RUN_ID, k, 'analyze', shard))
      }
      expected.push(keys.phaseManifest(RUN_ID, k, 'rescore', 0))
      expected.push(keys.phaseManifest(RUN_ID, k, 'update', 0))
      expected.push(keys.phaseManifest(RUN_ID, k, 'evaluate', 0))
    }
    const present = new Set(await allKeys(store, keys.runPrefix(RUN_ID)))
    assert.deepEqual(
      expected.filter((k) => !present.has(k)),
      [],
    )
    assert.ok(present.has(keys.sftAnnotations(RUN_ID)))
    assert.ok(present.has(keys.checkpoint(RUN_ID, 1, 'optimizer.safetensors')))
    assert.equal(
      result.checkpoint.prefix,
      keys.checkpoint(RUN_ID, 1, 'model.safetensors').replace(/model\.safetensors$/, ''),
    )
    assert.equal((await store.head(`${result.checkpoint.prefix}model.safetensors`))?.sha256, result.checkpoint.sha256)
    assert.equal(
      [...counters.reused.values()].reduce((a, b) => a + b, 0),
      0,
    )
  })

  it('a second run of the same run id computes nothing: every phase reuses its manifest', async () => {
    const computed = [...counters.computed.values()].reduce((a, b) => a + b, 0)
    await client.workflow.getHandle(RUN_ID).describe() // the first run is closed
    const result = await client.workflow.execute(seedRun, {
      taskQueue: TASK_QUEUES.control,
      workflowId: RUN_ID,
      args: [{ runId: RUN_ID, config: config() }],
    })
    assert.equal(result.evaluations.length, 4)
    assert.equal(
      [...counters.computed.values()].reduce((a, b) => a + b, 0),
      computed,
    )
    assert.equal(counters.reused.get('update'), 2)
    assert.equal(counters.reused.get('rollout'), 4)
    assert.equal(counters.reused.get('warmstart'), 1)
  })

  it('a bad config fails the run at once with InvalidRunConfig listing every problem', async () => {
    const bad = { ...config(), threads: 0, stage2: { ...config().stage2, groupSize: -1 } }
    const error = await client.workflow
      .execute(seedRun, {
        taskQueue: TASK_QUEUES.control,
        workflowId: `${RUN_ID}-bad`,
        args: [{ runId: `${RUN_ID}-bad`, config: bad }],
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      )
    assert.ok(error instanceof WorkflowFailedError, String(error))
    const cause = error.cause?.cause as { type?: string; message?: string } | undefined
    assert.equal(cause?.type, 'InvalidRunConfig')
    assert.match(cause?.message ?? '', /threads: /)
    assert.match(cause?.message ?? '', /stage2\.groupSize: /)
  })
})
