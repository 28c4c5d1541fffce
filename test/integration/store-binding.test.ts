// One store per run (issue 40, item 5), with `seedflow worker` processes on two stores sharing the task queues: a
// control worker on a folder plans the run (so it lives in the folder), a train worker on S3 gets its first phase.
// Before, that phase failed with "NotFoundError … restore the artifact" (run.json is in the folder, not in S3).
// Now the S3 worker refuses it at once, non-retryably (StoreMismatch), naming both stores and writing nothing,
// `seedflow status` shows the run's store, and the run finishes once a worker of its store takes over (`retry`).
import assert from 'node:assert/strict'
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Client, Connection, type WorkflowHandle } from '@temporalio/client'
import { listAll } from '../../store/artifact-store.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { TASK_QUEUES } from '../../workers/task-queues.ts'
import { seedRun } from '../../workflows/index.ts'
import { statusQuery } from '../../workflows/seed-run.ts'
import { seedflow } from '../cli/seedflow-process.ts'
import { microConfig } from '../compute/micro.ts'
import { testS3Store, testServers } from './servers.ts'
import { until } from './until.ts'
import { alive, startWorker, stopWorker, tail, type WorkerProcess } from './worker-processes.ts'

const RUN_ID = `store-binding-${process.pid}`
const PREFIX = `store-binding-${process.pid}`

describe('a run lives in one store: a worker of another store refuses it', () => {
  const dir = join(testServers().stateDir, `store-binding-${process.pid}`)
  const folder = join(dir, 'artifacts')
  const onFolder: NodeJS.ProcessEnv = { SEEDFLOW_S3_BUCKET: '', SEEDFLOW_ARTIFACTS_DIR: folder }
  const cliEnv: NodeJS.ProcessEnv = { ...onFolder, TEMPORAL_ADDRESS: testServers().temporalAddress }
  const workers: WorkerProcess[] = []
  let connection: Connection
  let handle: WorkflowHandle<typeof seedRun>

  const start = (name: string, args: string[], env?: NodeJS.ProcessEnv) => {
    const w = startWorker({ dir, name, prefix: PREFIX, args, ...(env ? { env } : {}) })
    workers.push(w)
    return w
  }

  before(async () => {
    mkdirSync(dir, { recursive: true })
    connection = await Connection.connect({ address: testServers().temporalAddress })
    start('control-on-folder', ['control'], onFolder)
    start('train-on-s3', ['train'])
    const c = microConfig('seed')
    // as `temporal workflow start` starts a run: no store in the input, so the planning worker's store is the run's
    handle = await new Client({ connection }).workflow.start(seedRun, {
      taskQueue: TASK_QUEUES.control,
      workflowId: RUN_ID,
      args: [{ runId: RUN_ID, config: { ...c, stage2: { ...c.stage2, iterations: 1 } } }],
      workflowExecutionTimeout: '5 minutes',
    })
  })

  after(async () => {
    for (const w of workers) await stopWorker(w)
    const description = await handle?.describe().catch(() => undefined)
    if (description?.status.name === 'RUNNING') await handle.terminate('store-binding test over').catch(() => {})
    await connection?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('the S3 worker refuses the first phase at once, StoreMismatch naming both stores, and writes nothing', async () => {
    const home = await new FsArtifactStore(folder).identity()
    const s3 = testS3Store(PREFIX)
    const other = await s3.identity()
    const wait = await until(
      'the run to wait for an operator',
      async () => {
        for (const w of workers) if (!alive(w)) throw new Error(`${w.name} exited:\n${tail(w)}`)
        return (await handle.query(statusQuery)).awaitingOperator ?? undefined
      },
      180_000,
    )
    assert.equal(wait.type, 'StoreMismatch', wait.message)
    assert.equal(wait.phase, 'prepare')
    const named = `run ${RUN_ID} lives in store ${home.id} (${home.location}), but this worker's store is ${other.id} (${other.location})`
    assert.ok(wait.message.includes(named), wait.message)
    // refused before it read or wrote: one attempt, and nothing of the run in S3
    const history = await handle.fetchHistory()
    const prepares = (history.events ?? []).filter(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'prepare',
    )
    assert.equal(prepares.length, 1)
    const started = (history.events ?? []).find(
      (e) => e.activityTaskStartedEventAttributes?.scheduledEventId?.toString() === prepares[0]?.eventId?.toString(),
    )
    assert.equal(started?.activityTaskStartedEventAttributes?.attempt, 1, 'refused on its first attempt')
    const keys: string[] = []
    for await (const { key } of listAll(s3, 'runs/')) keys.push(key)
    assert.deepEqual(keys, [])
  })

  it('seedflow status shows the store the run lives in', async () => {
    const home = await new FsArtifactStore(folder).identity()
    const r = await seedflow(['status', RUN_ID], cliEnv)
    assert.equal(r.code, 0, `${r.out}\n${r.err}`)
    assert.ok(r.out.includes(`\n  store       ${home.id} (${home.location})\n`), r.out)
    assert.match(r.out, /AWAITING AN OPERATOR since .*: StoreMismatch in prepare/)
    assert.match(r.out, /then: stop the worker of the other store named above/)
  })

  it('refuses a store in the workflow input that is not a store identity, before planning', async () => {
    const runId = `${RUN_ID}-bad-store`
    const bad = await new Client({ connection }).workflow.start(seedRun, {
      taskQueue: TASK_QUEUES.control,
      workflowId: runId,
      args: [{ runId, config: microConfig('seed'), store: { id: 42 } as never }],
      workflowExecutionTimeout: '1 minute',
    })
    const error = await bad.result().then(
      () => undefined,
      (e: unknown) => e as Error & { cause?: Error & { type?: string } },
    )
    assert.equal(error?.cause?.type, 'InvalidRunConfig', String(error))
    assert.match(error?.cause?.message ?? '', /^invalid run input:\nstore: expected \{ id, location \}/)
  })

  it('finishes once a worker of its store serves it and the operator retries', async () => {
    const s3Worker = workers.find((w) => w.name === 'train-on-s3')
    assert.ok(s3Worker)
    await stopWorker(s3Worker)
    start('local-on-folder', ['local'], onFolder)
    const retried = await seedflow(['retry', RUN_ID], cliEnv)
    assert.equal(retried.code, 0, `${retried.out}\n${retried.err}`)
    const result = await handle.result()
    assert.equal(result.outcome, 'completed')
    const home = await new FsArtifactStore(folder).identity()
    assert.deepEqual(result.store, { id: home.id, location: home.location })
    const closed = await seedflow(['status', RUN_ID], cliEnv)
    assert.ok(closed.out.includes(`\n  store       ${home.id} (${home.location})\n`), closed.out)
  })
})
