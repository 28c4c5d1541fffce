// Failure paths that end cleanly (real dev server and S3 server, the real pipeline activities on a micro
// config): an activity whose failure would be 9 MB fails the run at once with a bounded message; `seedflow
// abort` ends a run whose activity is between retries (the retry is cancelled, not waited out); `seedflow
// status` of a failed run shows why it failed and exits non-zero; `seedflow run` of a run id that is running
// exits at once with that reason and leaves no process behind.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { WorkflowFailedError } from '@temporalio/client'
import { ApplicationFailure } from '@temporalio/common'
import type { ActivityInterceptorsFactory } from '@temporalio/worker'
import { TASK_QUEUES } from '../../workers/task-queues.ts'
import { seedRun } from '../../workflows/index.ts'
import { seedflow } from '../cli/seedflow-process.ts'
import { microConfig } from '../compute/micro.ts'
import { allKeys, type PipelineHarness, startPipeline } from './pipeline-harness.ts'
import { testServers } from './servers.ts'
import { until } from './until.ts'

const PREFIX = `run-failures-${process.pid}`
const NINE_MB = 9 * 1024 * 1024

/** What the test's activity interceptor throws, by activity type (for runs whose id starts with `runPrefix`). */
const faults = new Map<string, { runPrefix: string; error: () => Error; calls: number }>()

const injected: ActivityInterceptorsFactory = (ctx) => ({
  inbound: {
    async execute(input, next) {
      const fault = faults.get(ctx.info.activityType)
      if (fault && (ctx.info.workflowExecution?.workflowId ?? '').startsWith(fault.runPrefix)) {
        fault.calls++
        throw fault.error()
      }
      return next(input)
    },
  },
})

describe('failure paths end cleanly (real servers)', () => {
  let harness: PipelineHarness
  const env = () => ({ TEMPORAL_ADDRESS: testServers().temporalAddress })

  before(async () => {
    harness = await startPipeline(PREFIX, { activityInterceptors: [injected] })
  })
  after(async () => {
    await harness?.close()
  })

  const config = () => {
    const c = microConfig('seed')
    return { ...c, evaluation: { ...c.evaluation, tasks: 2 } }
  }

  it('fails at once with a bounded message when an activity throws a 9 MB failure', async () => {
    const runId = `huge-${process.pid}`
    faults.set('planRun', {
      runPrefix: runId,
      error: () =>
        ApplicationFailure.nonRetryable(`model.folder ${'x'.repeat(NINE_MB)}: not found`, 'ModelImportError'),
      calls: 0,
    })
    const started = Date.now()
    const error = await harness.run(runId, config()).then(
      () => undefined,
      (e: unknown) => e,
    )
    const seconds = (Date.now() - started) / 1000
    assert.ok(error instanceof WorkflowFailedError, String(error))
    let failure: unknown = error
    while (failure instanceof Error && !(failure instanceof ApplicationFailure)) failure = failure.cause
    assert.ok(failure instanceof ApplicationFailure, String(error.cause))
    assert.equal(failure.type, 'ModelImportError')
    assert.ok(failure.message.length < 5000, `${failure.message.length} characters`)
    assert.match(failure.message, /more characters cut\)$/)
    assert.ok(seconds < 20, `the run took ${seconds.toFixed(1)} s to fail (a refused completion waits for a timeout)`)
    assert.equal(faults.get('planRun')?.calls, 1)
    faults.delete('planRun')

    // and `seedflow status` says why, exiting non-zero
    const status = await seedflow(['status', runId], env())
    assert.equal(status.code, 1, status.out + status.err)
    assert.match(status.out, new RegExp(`run ${runId}: workflow FAILED`))
    assert.match(status.out, /failure +ModelImportError in planRun: model\.folder x+ … \(\d+ more characters cut\)/)
    assert.ok(status.out.length < 10_000)
  })

  it('`seedflow status` of a run that failed on its configuration lists the bad fields and exits non-zero', async () => {
    const runId = `bad-config-${process.pid}`
    const c = config()
    const error = await harness.run(runId, { ...c, stage2: { ...c.stage2, lr: -1 } }).then(
      () => undefined,
      (e: unknown) => e,
    )
    assert.ok(error instanceof WorkflowFailedError)
    const status = await seedflow(['status', runId], env())
    assert.equal(status.code, 1, status.out + status.err)
    assert.match(status.out, /failure +InvalidRunConfig in planRun: /)
    assert.match(status.out, /stage2\.lr/)
    assert.doesNotMatch(status.out, /phase +prepare/)
  })

  it('refuses a seedRun input with a field besides runId, config and state, writing nothing', async () => {
    const runId = `extra-input-${process.pid}`
    const error = await harness.client.workflow
      .execute(seedRun, {
        taskQueue: TASK_QUEUES.control,
        workflowId: runId,
        args: [{ runId, config: config(), confg: {} } as never],
        workflowExecutionTimeout: '1 minute',
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      )
    assert.ok(error instanceof WorkflowFailedError, String(error))
    assert.ok(error.cause instanceof ApplicationFailure)
    assert.equal(error.cause.type, 'InvalidRunConfig')
    assert.match(error.cause.message, /confg: unknown field \(did you mean config\?\)/)
    assert.deepEqual(await allKeys(harness.store, `runs/${runId}/`), [])
  })

  it('`seedflow abort` cancels an activity that is retrying after failures instead of waiting it out', async () => {
    const runId = `abort-retrying-${process.pid}`
    faults.set('update', { runPrefix: runId, error: () => new Error('flaky update'), calls: 0 })
    const handle = await harness.client.workflow.start(seedRun, {
      taskQueue: TASK_QUEUES.control,
      workflowId: runId,
      args: [{ runId, config: config() }],
      workflowExecutionTimeout: '10 minutes',
    })
    const child = harness.client.workflow.getHandle(`${runId}/iter-0`)
    // between attempts: the first failed, the second is scheduled (2 s backoff) or running
    await until('a retrying update', async () => {
      const pending = (await child.describe()).raw.pendingActivities ?? []
      return pending.some((a) => a.activityType?.name === 'update' && a.lastFailure?.message === 'flaky update')
    })
    const callsAtAbort = faults.get('update')?.calls ?? 0
    const abort = await seedflow(['abort', runId, '--reason', 'stuck in retries'], env())
    assert.equal(abort.code, 0, abort.out + abort.err)
    assert.match(
      abort.out,
      /its update is retrying after failures \(attempt \d, last failure: flaky update\), so it is cancelled now/,
    )
    const started = Date.now()
    const result = await handle.result()
    const seconds = (Date.now() - started) / 1000
    assert.equal(result.outcome, 'aborted')
    assert.equal(result.aborted, 'stuck in retries')
    // without the cancel the run would run the remaining attempts (2 s and 8 s apart), then wait for an operator
    assert.ok(seconds < 5, `the run took ${seconds.toFixed(1)} s to end after the abort`)
    assert.ok((faults.get('update')?.calls ?? 0) <= callsAtAbort + 1, 'the update kept being retried after the abort')
    assert.equal((await child.describe()).status.name, 'CANCELLED')
    faults.delete('update')
    const status = await seedflow(['status', runId], env())
    assert.equal(status.code, 0, status.out + status.err)
    assert.match(status.out, /outcome +aborted: stuck in retries/)
  })

  it('`seedflow run` of a run id that is running exits at once naming it, and leaves no process behind', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'seedflow-run-dup-'))
    try {
      const runId = `dup-${process.pid}`
      // a run that is running: started with no worker on its queue, so it stays running
      const handle = await harness.client.workflow.start(seedRun, {
        taskQueue: `no-worker-${process.pid}`,
        workflowId: runId,
        args: [{ runId, config: config() }],
      })
      const file = join(dir, 'micro.json')
      await writeFile(file, JSON.stringify(config()))
      const started = Date.now()
      const r = await seedflow(['run', file, '--run-id', runId], {
        ...env(),
        SEEDFLOW_ARTIFACTS_DIR: join(dir, 'artifacts'),
        SEEDFLOW_S3_BUCKET: '',
      })
      const seconds = (Date.now() - started) / 1000
      assert.equal(r.code, 1, r.out + r.err)
      assert.ok(seconds < 10, `took ${seconds.toFixed(1)} s`)
      assert.match(r.err, new RegExp(`a run named ${runId} is already running on .*seedflow status ${runId}`))
      assert.doesNotMatch(r.err, /Cannot close connection/)
      assert.equal(r.pid !== undefined && children(r.pid).length, 0, 'a child of seedflow run is left behind')
      assert.equal((await handle.describe()).status.name, 'RUNNING', 'the running run is left alone')
      await handle.terminate('test over')
      assert.deepEqual(await allKeys(harness.store, `runs/${runId}/`), [])
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

/** Processes whose parent is `pid`. */
function children(pid: number): number[] {
  const out = execFileSync('ps', ['-e', '-o', 'pid=,ppid='], { encoding: 'utf8' })
  return out
    .split('\n')
    .map((line) => line.trim().split(/\s+/).map(Number))
    .filter(([, ppid]) => ppid === pid)
    .map(([p]) => p as number)
}
