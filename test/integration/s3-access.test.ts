// A wrong S3 secret against the real S3 server (issue 16, bug 5): every store operation fails at once with
// StoreAccessError naming the endpoint and the bucket, never the secret nor the whole access key id (a refused
// HEAD used to reach the CLI as `seedflow: UnknownError`); `seedflow audit` and `seedflow export` print that
// message and exit 1; a pipeline activity fails with it as a non-retryable failure, so a run on a worker with
// that secret fails at planRun without the 2 s + 8 s of activity retries (it used to take 3 attempts and 46 s).
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Client, Connection, WorkflowFailedError } from '@temporalio/client'
import { ApplicationFailure } from '@temporalio/common'
import { DefaultLogger, Runtime } from '@temporalio/worker'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { LOCAL_S3_CREDENTIALS, LOCAL_S3_REGION } from '../../infra/s3-server.ts'
import { StoreAccessError } from '../../store/errors.ts'
import { S3ArtifactStore } from '../../store/s3-store.ts'
import { createLocalWorker } from '../../workers/local.ts'
import { TASK_QUEUES } from '../../workers/task-queues.ts'
import { seedRun } from '../../workflows/index.ts'
import { seedflow } from '../cli/seedflow-process.ts'
import { microConfig } from '../compute/micro.ts'
import { testServers } from './servers.ts'

const PREFIX = `s3-access-${process.pid}`
const WRONG_SECRET = 'not-the-secret-0123456789'
const KEY_ID = LOCAL_S3_CREDENTIALS.accessKeyId

describe('a wrong S3 secret (real S3 server)', () => {
  let store: S3ArtifactStore
  let endpoint: string
  let bucket: string

  before(() => {
    ;({ s3Endpoint: endpoint, s3Bucket: bucket } = testServers())
    store = new S3ArtifactStore({
      bucket,
      prefix: PREFIX,
      endpoint,
      region: LOCAL_S3_REGION,
      credentials: { accessKeyId: KEY_ID, secretAccessKey: WRONG_SECRET },
    })
  })

  after(() => store?.destroy())

  /** The message as the operator must see it: what happened, where, and no secret. */
  function assertNamed(text: string): void {
    assert.ok(text.includes(`artifact store at ${endpoint} refused access to bucket ${bucket}`), text)
    assert.ok(text.includes(`access key id ${KEY_ID.slice(0, 4)}…`), text)
    assert.ok(!text.includes(WRONG_SECRET), `the secret is shown: ${text}`)
    assert.ok(!text.includes(LOCAL_S3_CREDENTIALS.secretAccessKey), text)
    assert.ok(!text.includes(KEY_ID), `the whole access key id is shown: ${text}`)
    assert.ok(!text.includes('UnknownError'), text)
  }

  it('get, put, putIfAbsent, list and head throw StoreAccessError at once', async () => {
    for (const [what, op, code] of [
      ['head', () => store.head('runs/x/run.json'), 'HTTP 403'], // a HEAD reply has no body to name the code
      ['get', () => store.get('runs/x/run.json'), 'SignatureDoesNotMatch'],
      ['put', () => store.put('runs/x/a.json', Buffer.from('{}')), 'SignatureDoesNotMatch'],
      ['putIfAbsent', () => store.putIfAbsent('runs/x/b.json', Buffer.from('{}')), 'SignatureDoesNotMatch'],
      ['list', () => store.list('runs/'), 'SignatureDoesNotMatch'],
    ] as const) {
      const started = Date.now()
      await assert.rejects(op(), (e: unknown) => {
        assert.ok(e instanceof StoreAccessError, `${what}: expected StoreAccessError, got ${String(e)}`)
        assert.equal(e.code, code, what)
        assert.equal(e.httpStatus, 403, what)
        assertNamed(e.message)
        return true
      })
      const ms = Date.now() - started
      assert.ok(ms < 3000, `${what} took ${ms} ms`)
    }
  })

  it('an access key id the server does not know is StoreAccessError too, not NotFoundError', async () => {
    // versitygw answers it with a 404 XAdminUserNotFound (AWS: a 403 InvalidAccessKeyId); a HEAD reply has no
    // body, so there it cannot be told from a missing object and reads as absent
    const stranger = new S3ArtifactStore({
      bucket,
      prefix: PREFIX,
      endpoint,
      region: LOCAL_S3_REGION,
      credentials: { accessKeyId: 'stranger-key-id', secretAccessKey: WRONG_SECRET },
    })
    try {
      for (const op of [() => stranger.get('runs/x/run.json'), () => stranger.list('runs/')]) {
        await assert.rejects(op(), (e: unknown) => {
          assert.ok(e instanceof StoreAccessError, `expected StoreAccessError, got ${String(e)}`)
          assert.equal(e.code, 'XAdminUserNotFound')
          assert.match(e.message, /the server does not know this access key id .*; access key id stra…/)
          assert.ok(!e.message.includes('stranger-key-id') && !e.message.includes(WRONG_SECRET), e.message)
          return true
        })
      }
    } finally {
      stranger.destroy()
    }
  })

  const env = (): NodeJS.ProcessEnv => ({
    SEEDFLOW_S3_BUCKET: bucket,
    SEEDFLOW_S3_ENDPOINT: endpoint,
    SEEDFLOW_S3_PREFIX: PREFIX,
    AWS_REGION: LOCAL_S3_REGION,
    AWS_ACCESS_KEY_ID: KEY_ID,
    AWS_SECRET_ACCESS_KEY: WRONG_SECRET,
  })

  it('`seedflow audit` exits 1 printing the refusal, not UnknownError, and not the secret', async () => {
    const r = await seedflow(['audit', 'some-run'], env())
    assert.equal(r.code, 1, `${r.out}\n${r.err}`)
    assert.match(r.err, /^seedflow: artifact store at \S+ refused access to bucket \S+: the credentials were refused/)
    assertNamed(r.err)
    assert.ok(!r.out.includes(WRONG_SECRET))
  })

  it('`seedflow export` prints the same message', async () => {
    const out = await mkdtemp(join(tmpdir(), 'seedflow-s3-access-'))
    try {
      const r = await seedflow(['export', 'some-run', '--out', join(out, 'ckpt')], env())
      assert.equal(r.code, 1, `${r.out}\n${r.err}`)
      assert.match(r.err, /^seedflow: artifact store at \S+ refused access to bucket \S+: the credentials were refused/)
      assertNamed(r.err)
    } finally {
      await rm(out, { recursive: true, force: true })
    }
  })

  it('a pipeline activity fails with a non-retryable StoreAccessError at once', async () => {
    const engine = createLocalEngine({ threads: 1 })
    try {
      const acts = createPipelineActivities({ store, engine })
      const started = Date.now()
      const error = await acts.planRun({ runId: `s3-access-${process.pid}`, config: microConfig('seed') }).then(
        () => undefined,
        (e: unknown) => e,
      )
      assert.ok(error instanceof ApplicationFailure, `expected an ApplicationFailure, got ${String(error)}`)
      assert.equal(error.type, 'StoreAccessError')
      assert.equal(error.nonRetryable, true)
      assert.match(error.message, /^planRun: artifact store at /)
      assertNamed(error.message)
      assert.ok(Date.now() - started < 3000)
    } finally {
      await engine.close()
    }
  })

  it('a run on a worker with the wrong secret fails at planRun on the first attempt', async () => {
    const { temporalAddress } = testServers()
    Runtime.install({ logger: new DefaultLogger('WARN') })
    const engine = createLocalEngine({ threads: 1 })
    const local = await createLocalWorker({
      connectionOptions: { address: temporalAddress },
      namespace: 'default',
      store,
      engine,
    })
    const running = local.workers.map((w) => w.run())
    const connection = await Connection.connect({ address: temporalAddress })
    try {
      const runId = `s3-access-run-${process.pid}`
      const started = Date.now()
      const error = await new Client({ connection }).workflow
        .execute(seedRun, {
          taskQueue: TASK_QUEUES.control,
          workflowId: runId,
          args: [{ runId, config: microConfig('seed') }],
          workflowExecutionTimeout: '2 minutes',
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        )
      const seconds = (Date.now() - started) / 1000
      assert.ok(error instanceof WorkflowFailedError, `expected the run to fail, got ${String(error)}`)
      let failure: unknown = error
      while (failure instanceof Error && !(failure instanceof ApplicationFailure)) failure = failure.cause
      assert.ok(failure instanceof ApplicationFailure, String(error))
      assert.equal(failure.type, 'StoreAccessError')
      assert.match(failure.message, /^planRun: artifact store at /)
      assertNamed(failure.message)
      assert.ok(seconds < 2, `took ${seconds} s: the activity was retried (its first retry waits 2 s)`)
    } finally {
      for (const w of local.workers) w.shutdown()
      await Promise.all(running)
      await local.close()
      await engine.close()
      await connection.close()
    }
  })
})
