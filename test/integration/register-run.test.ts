import assert from 'node:assert/strict'
import { writeFile } from 'node:fs/promises'
import { after, before, describe, it } from 'node:test'
import { Client, Connection, WorkflowFailedError } from '@temporalio/client'
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js'
import { DefaultLogger, type NativeConnection, Runtime, type Worker } from '@temporalio/worker'
import type { RunRecord } from '../../activities/index.ts'
import { SEARCH_ATTRIBUTES } from '../../infra/temporal-server.ts'
import { getJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import type { S3ArtifactStore } from '../../store/s3-store.ts'
import { createLocalWorker } from '../../workers/local.ts'
import { registerRun } from '../../workflows/index.ts'
import { HISTORY_FIXTURE } from '../workflows/history-fixtures.ts'
import { testS3Store, testServers } from './servers.ts'

const TASK_QUEUE = `register-run-${process.pid}`

describe('registerRun on the real dev server with the S3 store', () => {
  let store: S3ArtifactStore
  let worker: Worker
  let workerConnection: NativeConnection
  let running: Promise<void>
  let connection: Connection
  let client: Client

  before(async () => {
    Runtime.install({ logger: new DefaultLogger('WARN') }) // keep the bundler's report out of the test output
    const { temporalAddress } = testServers()
    store = testS3Store(`register-run-${process.pid}`)
    ;({ worker, connection: workerConnection } = await createLocalWorker({
      connectionOptions: { address: temporalAddress },
      namespace: 'default',
      store,
      taskQueue: TASK_QUEUE,
    }))
    running = worker.run()
    connection = await Connection.connect({ address: temporalAddress })
    client = new Client({ connection })
  })

  after(async () => {
    worker?.shutdown()
    await running
    await workerConnection?.close()
    await connection?.close()
    store?.destroy()
  })

  it('writes run.json through the activity and returns its key and sha256', async () => {
    const config = { env: 'sokoban', algorithm: 'seed', iterations: 2 }
    const handle = await client.workflow.start(registerRun, {
      taskQueue: TASK_QUEUE,
      workflowId: 'slice-run-1',
      args: [{ runId: 'slice-run-1', config }],
    })
    const ref = await handle.result()
    assert.equal(ref.key, keys.runRecord('slice-run-1'))
    assert.deepEqual(await store.head(ref.key), ref)
    const record = (await getJson(store, ref.key)) as RunRecord
    assert.equal(record.runId, 'slice-run-1')
    assert.deepEqual(record.config, config)
    assert.match(record.configSha256, /^[0-9a-f]{64}$/)
    if (process.env.SEEDFLOW_RECORD_HISTORIES === '1') {
      await writeFile(HISTORY_FIXTURE, `${historyToJSON(await handle.fetchHistory())}\n`)
    }
  })

  it('returns the same record when the run is registered again with the same config', async () => {
    const config = { b: 2, a: 1 }
    const first = await client.workflow.execute(registerRun, {
      taskQueue: TASK_QUEUE,
      workflowId: 'slice-run-2',
      args: [{ runId: 'slice-run-2', config }],
    })
    const second = await client.workflow.execute(registerRun, {
      taskQueue: TASK_QUEUE,
      workflowId: 'slice-run-2',
      args: [{ runId: 'slice-run-2', config: { a: 1, b: 2 } }],
    })
    assert.deepEqual(second, first)
  })

  it('fails for good when a run id is reused with another config', async () => {
    await client.workflow.execute(registerRun, {
      taskQueue: TASK_QUEUE,
      workflowId: 'slice-run-3',
      args: [{ runId: 'slice-run-3', config: { lr: 1e-4 } }],
    })
    await assert.rejects(
      client.workflow.execute(registerRun, {
        taskQueue: TASK_QUEUE,
        workflowId: 'slice-run-3',
        args: [{ runId: 'slice-run-3', config: { lr: 2e-4 } }],
      }),
      (e: unknown) => {
        assert.ok(e instanceof WorkflowFailedError)
        const cause = e.cause as { type?: string; message?: string; cause?: { type?: string } }
        assert.equal(cause.cause?.type ?? cause.type, 'RunConfigConflict')
        return true
      },
    )
  })

  it('rejects input whose run id differs from the workflow id, without retrying', async () => {
    await assert.rejects(
      client.workflow.execute(registerRun, {
        taskQueue: TASK_QUEUE,
        workflowId: 'slice-run-4',
        args: [{ runId: 'another-run', config: {} }],
      }),
      (e: unknown) => {
        assert.ok(e instanceof WorkflowFailedError)
        const cause = e.cause as { type?: string; message?: string }
        assert.equal(cause.type, 'InvalidRunInput')
        assert.match(cause.message ?? '', /"another-run" differs from the workflow id "slice-run-4"/)
        return true
      },
    )
  })

  it('rejects input with fields besides runId and config, writing nothing', async () => {
    await assert.rejects(
      client.workflow.execute(registerRun, {
        taskQueue: TASK_QUEUE,
        workflowId: 'slice-run-5',
        args: [{ runId: 'slice-run-5', config: {}, confg: {}, foo: 1 } as never],
      }),
      (e: unknown) => {
        assert.ok(e instanceof WorkflowFailedError)
        const cause = e.cause as { type?: string; message?: string }
        assert.equal(cause.type, 'InvalidRunInput')
        assert.equal(
          cause.message,
          'invalid run input: confg: unknown field (did you mean config?); foo: unknown field',
        )
        return true
      },
    )
    assert.equal(await store.head(keys.runRecord('slice-run-5')), undefined)
  })

  it('has the custom search attributes of docs/design.md §10.4 registered', async () => {
    const response = await connection.operatorService.listSearchAttributes({ namespace: 'default' })
    const custom = response.customAttributes ?? {}
    for (const name of Object.keys(SEARCH_ATTRIBUTES))
      assert.ok(name in custom, `${name} missing: ${Object.keys(custom)}`)
  })
})
