// Connections to the S3 server cut in the middle of an upload, through a loopback proxy that closes them after
// some bytes: a cut single PUT and a cut multipart part are retried and land whole; an upload cut on every
// attempt fails and leaves no object behind; and a worker whose S3 endpoint is the proxy finishes a run although
// every SDK attempt of its iteration checkpoint's upload was cut once (Temporal retries the update).
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { after, before, describe, it } from 'node:test'
import { Client, Connection, type WorkflowHandle } from '@temporalio/client'
import { LOCAL_S3_CREDENTIALS, LOCAL_S3_REGION } from '../../infra/s3-server.ts'
import { sha256Hex } from '../../store/hash.ts'
import { keys } from '../../store/keys.ts'
import { S3ArtifactStore } from '../../store/s3-store.ts'
import { TASK_QUEUES } from '../../workers/task-queues.ts'
import { seedRun } from '../../workflows/index.ts'
import { microConfig } from '../compute/micro.ts'
import { type CuttingProxy, startCuttingProxy } from './cutting-proxy.ts'
import { finishedPhases } from './pipeline-harness.ts'
import { testS3Store, testServers } from './servers.ts'
import { startWorker, stopWorker, type WorkerProcess } from './worker-processes.ts'

const PREFIX = `s3-cut-${process.pid}`
const RUN_ID = `s3-cut-${process.pid}`

describe('S3 connections cut mid-upload (loopback proxy, real S3 server)', () => {
  let proxy: CuttingProxy
  let viaProxy: S3ArtifactStore
  let direct: S3ArtifactStore

  before(async () => {
    const { hostname, port } = new URL(testServers().s3Endpoint)
    proxy = await startCuttingProxy({ host: hostname, port: Number(port) })
    viaProxy = new S3ArtifactStore({
      bucket: testServers().s3Bucket,
      prefix: PREFIX,
      endpoint: proxy.endpoint,
      region: LOCAL_S3_REGION,
      credentials: LOCAL_S3_CREDENTIALS,
    })
    direct = testS3Store(PREFIX)
  })

  after(async () => {
    viaProxy?.destroy()
    direct?.destroy()
    await proxy?.close()
  })

  it('retries a single PUT cut halfway and stores it whole', async () => {
    const data = randomBytes(1 << 20)
    const before = proxy.cuts
    proxy.cut({ times: 1, afterBytes: 512 * 1024, match: `PUT /${testServers().s3Bucket}/${PREFIX}/single` })
    await viaProxy.put('single/blob.bin', data)
    assert.equal(proxy.cuts - before, 1)
    assert.equal(sha256Hex(await direct.get('single/blob.bin')), sha256Hex(data))
  })

  it('retries a multipart part cut halfway and stores the object whole', async () => {
    const data = randomBytes(20 << 20) // three parts of at most 8 MiB
    const before = proxy.cuts
    proxy.cut({ times: 1, afterBytes: 4 << 20, match: 'partNumber=2' })
    await viaProxy.putStream('multi/blob.bin', Readable.from([data]))
    assert.equal(proxy.cuts - before, 1)
    assert.equal(sha256Hex(await direct.get('multi/blob.bin')), sha256Hex(data))
  })

  it('leaves no object when every attempt is cut', async () => {
    proxy.cut({ times: 100, afterBytes: 256 * 1024, match: `/${PREFIX}/doomed` })
    await assert.rejects(viaProxy.put('doomed/single.bin', randomBytes(1 << 20)))
    proxy.cut({ times: 100, afterBytes: 1 << 20, match: 'partNumber=' })
    await assert.rejects(viaProxy.putStream('doomed/multi.bin', Readable.from([randomBytes(20 << 20)])))
    proxy.cut({ times: 0, afterBytes: 0 })
    assert.equal(await direct.head('doomed/single.bin'), undefined)
    assert.equal(await direct.head('doomed/multi.bin'), undefined)
    assert.deepEqual((await direct.list('doomed/')).objects, [])
  })

  describe('a worker whose S3 endpoint is the proxy', () => {
    let worker: WorkerProcess | undefined
    let connection: Connection
    let handle: WorkflowHandle<typeof seedRun> | undefined

    after(async () => {
      if (worker) await stopWorker(worker)
      if (handle) {
        const description = await handle.describe().catch(() => undefined)
        if (description?.status.name === 'RUNNING') await handle.terminate('s3-cut test ended').catch(() => {})
      }
      await connection?.close()
    })

    it('finishes the run after every attempt of the checkpoint upload was cut once', async () => {
      const dir = join(testServers().stateDir, `s3-cut-${process.pid}`)
      mkdirSync(dir, { recursive: true })
      const checkpointKey = keys.checkpoint(RUN_ID, 0, 'model.safetensors')
      // the SDK makes 3 attempts per request: all three cut, so the update activity fails and Temporal retries it
      proxy.cut({ times: 3, afterBytes: 2048, match: `/${PREFIX}/${checkpointKey}` })
      const before = proxy.cuts
      worker = startWorker({
        dir,
        name: 'worker',
        prefix: PREFIX,
        args: ['--episodes-per-shard', '4'],
        env: { SEEDFLOW_S3_ENDPOINT: proxy.endpoint },
      })
      connection = await Connection.connect({ address: testServers().temporalAddress })
      const c = microConfig('seed')
      handle = await new Client({ connection }).workflow.start(seedRun, {
        taskQueue: TASK_QUEUES.control,
        workflowId: RUN_ID,
        args: [{ runId: RUN_ID, config: { ...c, stage2: { ...c.stage2, iterations: 1 } } }],
        workflowExecutionTimeout: '4 minutes',
      })
      const result = await handle.result()
      assert.ok(result.checkpoint, `run ended without a checkpoint (${result.outcome})`)
      assert.equal(proxy.cuts - before, 3)
      assert.equal(result.checkpoint.prefix, checkpointKey.slice(0, -'model.safetensors'.length))
      const model = await direct.get(checkpointKey) // verified against its recorded sha256
      assert.equal(sha256Hex(model), result.checkpoint.sha256)
      assert.ok((await finishedPhases(direct, RUN_ID)).includes('0000/update/0000'))
    })
  })
})
