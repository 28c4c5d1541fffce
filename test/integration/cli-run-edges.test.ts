// `seedflow run` and `seedflow status` on their edge paths, as a user runs them (issue 40, items 7 to 9): a
// Temporal server that dies between the workflow's start and its worker's (a server of the test's own, never the
// shared one), Ctrl-C while the run waits for an operator, a status query that no worker answers, and an S3
// store that refuses the command's credentials.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Client, Connection } from '@temporalio/client'
import { LOCAL_S3_CREDENTIALS, LOCAL_S3_REGION } from '../../infra/s3-server.ts'
import { seedRun } from '../../workflows/index.ts'
import { seedflow } from '../cli/seedflow-process.ts'
import { microConfig } from '../compute/micro.ts'
import { startOwnTemporal } from './own-temporal.ts'
import { testServers } from './servers.ts'
import { until } from './until.ts'

describe('seedflow run and status: edge paths (CLI as a child process)', () => {
  let dir: string
  let env: NodeJS.ProcessEnv
  let connection: Connection
  let client: Client

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'seedflow-cli-edges-'))
    env = {
      TEMPORAL_ADDRESS: testServers().temporalAddress,
      SEEDFLOW_ARTIFACTS_DIR: join(dir, 'artifacts'),
      SEEDFLOW_S3_BUCKET: '',
      SEEDFLOW_FAULT: '',
      SEEDFLOW_STATUS_TIMEOUT: '',
    }
    connection = await Connection.connect({ address: testServers().temporalAddress })
    client = new Client({ connection })
  })

  after(async () => {
    await connection?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  function configFile(name: string, change: (c: ReturnType<typeof microConfig>) => object = (c) => c): string {
    const file = join(dir, `${name}.json`)
    writeFileSync(file, JSON.stringify(change(microConfig('seed'))))
    return file
  }

  it('exits non-zero within 10 s when the server dies before its worker starts, and says the run was not terminated', async (t) => {
    const temporal = await startOwnTemporal('cli-worker-start')
    const own = await Connection.connect({ address: temporal.address })
    const ownClient = new Client({ connection: own })
    const runId = `cli-worker-start-${process.pid}`
    let killedAt = 0
    let killing: Promise<void> | undefined
    try {
      const r = await seedflow(
        ['run', configFile('worker-start'), '--run-id', runId],
        { ...env, TEMPORAL_ADDRESS: temporal.address },
        (line) => {
          if (killing || !line.includes('starting workflow')) return
          // once the workflow exists: its worker is then still being created (bundling the workflows takes seconds)
          killing = until('the started workflow', () => ownClient.workflow.getHandle(runId).describe(), 10_000).then(
            async () => {
              await temporal.kill()
              killedAt = Date.now()
            },
          )
        },
        undefined,
        { killAfterMs: 90_000 },
      )
      await killing
      assert.ok(killedAt > 0, r.out)
      assert.ok(!r.killed, `still running 90 s after the server died\n${r.out}\n${r.err}`)
      const seconds = (r.exitedAt - killedAt) / 1000
      t.diagnostic(`exited ${seconds.toFixed(1)} s after the server died`)
      assert.ok(seconds < 10, `exited ${seconds.toFixed(1)} s after the server died\n${r.err}`)
      assert.equal(r.code, 1, r.err)
      assert.doesNotMatch(r.out, /worker on task queues/)
      assert.ok(r.err.includes('seedflow run could not start its worker: '), r.err)
      assert.ok(
        r.err.includes(`run ${runId} was NOT terminated (`) &&
          r.err.includes(`): it stays RUNNING on ${temporal.address} with no worker;`) &&
          r.err.includes(`\`seedflow worker --run ${runId}\` continues it`),
        r.err,
      )
      // and so it is: the same server again (its state survived) still has it running
      await temporal.restart()
      const handle = ownClient.workflow.getHandle(runId)
      assert.equal((await handle.describe()).status.name, 'RUNNING')
      await handle.terminate('test over')
    } finally {
      await own.close()
      await temporal.stop()
    }
  })

  it('on Ctrl-C while the run waits for an operator exits 130 within 10 s, with the interrupt message', async (t) => {
    const runId = `cli-interrupt-awaiting-${process.pid}`
    const file = configFile('diverging', (c) => ({ ...c, stage2: { ...c.stage2, lr: 1e12 } }))
    let sentAt = 0
    const r = await seedflow(
      ['run', file, '--run-id', runId],
      env,
      (line, signal) => {
        if (sentAt === 0 && /awaiting an operator: NonFiniteLossError/.test(line)) {
          sentAt = Date.now()
          signal('SIGINT')
        }
      },
      undefined,
      { killAfterMs: 240_000 },
    )
    await client.workflow
      .getHandle(runId)
      .terminate('test over')
      .catch(() => {})
    assert.ok(sentAt > 0, r.out)
    assert.doesNotMatch(r.err, /Channel has been shut down/)
    assert.equal(r.code, 130, `${r.out}\n${r.err}`)
    assert.match(r.err, new RegExp(`interrupted \\(SIGINT\\): run ${runId} goes on`))
    // the result's long poll used to outlive the connection and hold the exit for the rest of its poll (14–16 s)
    const seconds = (r.exitedAt - sentAt) / 1000
    t.diagnostic(`exited ${seconds.toFixed(1)} s after Ctrl-C`)
    assert.ok(seconds < 10, `exited ${seconds.toFixed(1)} s after Ctrl-C`)
  })

  describe('status of a run that no worker serves', () => {
    const runId = `cli-status-unserved-${process.pid}`

    before(async () => {
      // a queue nobody polls: the run exists and is RUNNING, its status query has no one to answer it
      await client.workflow.start(seedRun, {
        taskQueue: `nobody-polls-${process.pid}`,
        workflowId: runId,
        args: [{ runId, config: microConfig('seed') }],
      })
    })

    after(async () => {
      await client.workflow
        .getHandle(runId)
        .terminate('test over')
        .catch(() => {})
    })

    it('gives up at --timeout, counted from the command start, saying no worker answered', async (t) => {
      const started = Date.now()
      const r = await seedflow(['status', runId, '--timeout', '4'], env, undefined, undefined, { killAfterMs: 60_000 })
      const seconds = (r.exitedAt - started) / 1000
      assert.equal(r.code, 1, `${r.out}\n${r.err}`)
      assert.ok(
        r.err.includes(
          `run ${runId} on ${testServers().temporalAddress} did not answer its status query within 4 s of the ` +
            "command's start (--timeout): is a worker running?",
        ),
        r.err,
      )
      t.diagnostic(`exited after ${seconds.toFixed(1)} s`)
      // a query gets 1 s at least, however long the command took to start (seconds on a loaded machine)
      assert.ok(seconds < 4 + 5, `exited after ${seconds.toFixed(1)} s`)
    })

    it('gives up within 16 s by default (SEEDFLOW_STATUS_TIMEOUT unset)', async (t) => {
      const started = Date.now()
      const r = await seedflow(['status', runId], env, undefined, undefined, { killAfterMs: 60_000 })
      const seconds = (r.exitedAt - started) / 1000
      assert.equal(r.code, 1, `${r.out}\n${r.err}`)
      assert.ok(r.err.includes('did not answer its status query within 15 s'), r.err)
      t.diagnostic(`exited after ${seconds.toFixed(1)} s`)
      assert.ok(seconds < 16, `exited after ${seconds.toFixed(1)} s`)
    })
  })

  it('refuses an S3 store with a wrong secret before the workflow starts, naming endpoint and bucket', async () => {
    const { s3Endpoint, s3Bucket } = testServers()
    const runId = `cli-store-refused-${process.pid}`
    const secret = 'not-the-secret-0123456789'
    const r = await seedflow(['run', configFile('s3-refused'), '--run-id', runId], {
      ...env,
      SEEDFLOW_S3_BUCKET: s3Bucket,
      SEEDFLOW_S3_ENDPOINT: s3Endpoint,
      SEEDFLOW_S3_PREFIX: `cli-edges-${process.pid}`,
      AWS_REGION: LOCAL_S3_REGION,
      AWS_ACCESS_KEY_ID: LOCAL_S3_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: secret,
    })
    assert.equal(r.code, 1, `${r.out}\n${r.err}`)
    assert.ok(r.err.includes(`seedflow run cannot use the artifact store s3://${s3Bucket}/`), r.err)
    assert.ok(r.err.includes(`artifact store at ${s3Endpoint} refused access to bucket ${s3Bucket}`), r.err)
    assert.ok(r.err.includes('nothing was started'), r.err)
    assert.ok(!r.err.includes(secret) && !r.out.includes(secret), 'the secret is shown')
    assert.doesNotMatch(r.out, /starting workflow/)
    await assert.rejects(client.workflow.getHandle(runId).describe(), { name: 'WorkflowNotFoundError' })
  })
})
