// A run whose S3 server goes away mid-run (versitygw stopped, the local conditional-write gate still
// listening): the phase fails with StoreUnavailableError naming the endpoint (not an XML parse error), is
// retried, and the run then waits for an operator with that message instead of failing.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Client, Connection } from '@temporalio/client'
import { DefaultLogger, Runtime } from '@temporalio/worker'
import { createLocalEngine, type Engine } from '../../engine/index.ts'
import type { S3Server } from '../../infra/s3-server.ts'
import { S3ArtifactStore } from '../../store/s3-store.ts'
import { createLocalWorker, type LocalWorker } from '../../workers/local.ts'
import { TASK_QUEUES } from '../../workers/task-queues.ts'
import { seedRun } from '../../workflows/index.ts'
import { statusQuery } from '../../workflows/seed-run.ts'
import { microConfig } from '../compute/micro.ts'
import { startOwnS3Server, testServers } from './servers.ts'
import { until } from './until.ts'

describe('the S3 server stopped during a run (real dev server, own S3 server behind the gate)', () => {
  let server: S3Server
  let store: S3ArtifactStore
  let engine: Engine
  let local: LocalWorker
  let running: Promise<void>[]
  let connection: Connection

  before(async () => {
    Runtime.install({ logger: new DefaultLogger('ERROR') })
    server = await startOwnS3Server('down-mid-run')
    store = new S3ArtifactStore(server.storeOptions())
    engine = createLocalEngine({ threads: 1 })
    local = await createLocalWorker({
      connectionOptions: { address: testServers().temporalAddress },
      namespace: 'default',
      store,
      engine,
      episodesPerShard: 2,
    })
    running = local.workers.map((w) => w.run())
    connection = await Connection.connect({ address: testServers().temporalAddress })
  })

  after(async () => {
    for (const w of local?.workers ?? []) if (w.getState() === 'RUNNING') w.shutdown()
    await Promise.allSettled(running ?? [])
    await local?.close()
    await engine?.close()
    await connection?.close()
    store?.destroy()
    await server?.stop()
  })

  it('waits for an operator with StoreUnavailableError naming the endpoint', async () => {
    const client = new Client({ connection })
    const runId = `s3-down-${process.pid}`
    const c = microConfig('seed')
    const handle = await client.workflow.start(seedRun, {
      taskQueue: TASK_QUEUES.control,
      workflowId: runId,
      args: [{ runId, config: { ...c, evaluation: { ...c.evaluation, tasks: 2 } } }],
      workflowExecutionTimeout: '5 minutes',
    })
    await until('Stage 2', async () => (await handle.query(statusQuery)).phase === 'iteration')
    process.kill(server.pid, 'SIGKILL') // versitygw only (this test started it); the gate keeps listening
    const wait = await until(
      'awaiting an operator',
      async () => (await handle.query(statusQuery)).awaitingOperator ?? undefined,
      90_000,
    )
    assert.equal(wait.type, 'StoreUnavailableError', wait.message)
    assert.match(wait.message, new RegExp(`artifact store unreachable at ${server.endpoint}`))
    assert.doesNotMatch(wait.message, /XML parse error/)
    await handle.terminate('test over')
  })
})
