// What `seedflow run`'s worker serves (issue 40, item 6), with the real CLI against the test's Temporal server and
// a folder store: it serves its own run only (a run waiting on the shared queues is never touched, so its Ctrl-C
// cannot interrupt another run's work), and a run whose `seedflow run` was interrupted is finished by
// `seedflow worker --run <id>`, which polls that run's own queues.
import assert from 'node:assert/strict'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Client, Connection } from '@temporalio/client'
import { runTaskQueue, TASK_QUEUES, taskQueuesOf } from '../../workers/task-queues.ts'
import { seedRun } from '../../workflows/index.ts'
import { seedflow } from '../cli/seedflow-process.ts'
import { microConfig } from '../compute/micro.ts'
import { activityTimeline } from './activity-timeline.ts'
import { testServers } from './servers.ts'
import { alive, sleep, startWorker, stopWorker, tail, type WorkerProcess } from './worker-processes.ts'

describe('seedflow run serves its own run only; seedflow worker --run resumes it', () => {
  const dir = join(testServers().stateDir, `run-routing-${process.pid}`)
  const folder = join(dir, 'artifacts')
  const env: NodeJS.ProcessEnv = {
    TEMPORAL_ADDRESS: testServers().temporalAddress,
    SEEDFLOW_ARTIFACTS_DIR: folder,
    SEEDFLOW_S3_BUCKET: '',
    SEEDFLOW_ORT_THREADS: '1',
  }
  let connection: Connection
  const workers: WorkerProcess[] = []
  const client = () => new Client({ connection })

  before(async () => {
    mkdirSync(dir, { recursive: true })
    connection = await Connection.connect({ address: testServers().temporalAddress })
  })

  after(async () => {
    for (const w of workers) await stopWorker(w)
    await connection?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it("takes no work of a run on the shared queues, and keeps its own run's work on its own queues", async () => {
    // another run, as `temporal workflow start` starts one, waiting for a plain `seedflow worker`
    const other = await client().workflow.start(seedRun, {
      taskQueue: TASK_QUEUES.control,
      workflowId: `routing-other-${process.pid}`,
      args: [{ runId: `routing-other-${process.pid}`, config: microConfig('seed') }],
      workflowExecutionTimeout: '5 minutes',
    })
    try {
      const c = microConfig('seed')
      const file = join(dir, 'one.json')
      writeFileSync(file, JSON.stringify({ ...c, stage2: { ...c.stage2, iterations: 1 } }))
      const runId = `routing-mine-${process.pid}`
      const r = await seedflow(['run', file, '--run-id', runId], env)
      assert.equal(r.code, 0, `exit ${r.code}\n${r.out}\n${r.err}`)
      const own = taskQueuesOf(runTaskQueue(runId))
      assert.match(
        r.out,
        new RegExp(`worker on task queues ${own.control}, ${own.rollout}, ${own.train} \\(run ${runId} only\\)`),
      )
      // the other run's first workflow task was never picked up: no worker of the shared queue ran
      const untouched = await other.fetchHistory()
      const started = (untouched.events ?? []).filter((e) => e.workflowTaskStartedEventAttributes)
      assert.equal(started.length, 0, `seedflow run's worker ran the other run's workflow (${started.length} tasks)`)
      // and its own run's activities were all on its own queues
      const history = await client().workflow.getHandle(runId).fetchHistory()
      const queues = new Set<string>()
      for (const e of history.events ?? []) {
        const name = e.activityTaskScheduledEventAttributes?.taskQueue?.name
        if (name) queues.add(name)
      }
      assert.deepEqual([...queues].sort(), [own.control, own.rollout, own.train].sort())
    } finally {
      await other.terminate('run-routing test over')
    }
  })

  it('a run whose seedflow run was interrupted is finished by seedflow worker --run <id>', async () => {
    const c = microConfig('seed')
    const file = join(dir, 'three.json')
    writeFileSync(file, JSON.stringify({ ...c, stage2: { ...c.stage2, iterations: 3 } }))
    const runId = `routing-resumed-${process.pid}`
    let sent = false
    const r = await seedflow(['run', file, '--run-id', runId], env, (line, signal) => {
      if (!sent && /iteration \d+ \(\d+ of 3\)/.test(line)) {
        sent = true
        signal('SIGINT')
      }
    })
    assert.ok(sent, r.out)
    assert.equal(r.code, 130, `${r.out}\n${r.err}`)
    assert.match(r.err, new RegExp(`\`seedflow worker --run ${runId}\` continues it`))
    const handle = client().workflow.getHandle<typeof seedRun>(runId)
    assert.equal((await handle.describe()).status.name, 'RUNNING')
    const worker = startWorker({ dir, name: 'resume', prefix: 'unused', args: ['--run', runId], env })
    workers.push(worker)
    let done = false
    const result = await Promise.race([
      handle.result().finally(() => {
        done = true
      }),
      (async () => {
        for (let waited = 0; !done; waited += 200) {
          if (!alive(worker)) throw new Error(`seedflow worker --run exited:\n${tail(worker)}`)
          if (waited > 240_000)
            throw new Error(
              `run ${runId} not done 240 s after its worker started:\n${tail(worker)}\n` +
                `its activities:\n${await activityTimeline(handle)}`,
            )
          await sleep(200)
        }
        return new Promise<never>(() => {})
      })(),
    ])
    if (process.env.SEEDFLOW_TEST_TIMELINE) console.log(await activityTimeline(handle))
    assert.equal(result.outcome, 'completed')
    assert.ok(
      result.evaluations.some((e) => e.label === 'iteration 2'),
      JSON.stringify(result.evaluations.map((e) => e.label)),
    )
    const own = taskQueuesOf(runTaskQueue(runId))
    assert.match(
      readFileSync(worker.log, 'utf8'),
      new RegExp(`polling task queues ${own.control}, ${own.rollout}, ${own.train} \\(run ${runId} only;`),
    )
    await stopWorker(worker, 'SIGINT')
  })
})
