// The split deployment of docs/design.md §10.1, as separate `seedflow worker <role>` processes: one control, two
// rollout and one train worker run a micro seedRun. The rollout workers share the fan-out (each computes shards,
// per its counters file), every worker serves Prometheus metrics, and every metric the Grafana dashboard reads is
// exported by them. One rollout worker throws once inside a rollout shard (SEEDFLOW_FAULT ...:throw), so the run
// also has a retried failure for the failure panels.
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Client, Connection, type WorkflowHandle } from '@temporalio/client'
import { PROJECT_ROOT } from '../../infra/tools.ts'
import { TASK_QUEUES } from '../../workers/task-queues.ts'
import { seedRun } from '../../workflows/index.ts'
import type { SeedRunResult } from '../../workflows/seed-run.ts'
import { microConfig } from '../compute/micro.ts'
import { dashboardMetricNames, sampledMetricNames } from './dashboard-metrics.ts'
import { testServers } from './servers.ts'
import { alive, countersOf, sleep, startWorker, stopWorker, tail, type WorkerProcess } from './worker-processes.ts'

const RUN_ID = `worker-roles-${process.pid}`
const PREFIX = `worker-roles-${process.pid}`
const SHARDS = 4
const DASHBOARD = join(PROJECT_ROOT, 'infra', 'grafana', 'seedflow-dashboard.json')

/** One iteration of 4 tasks × 2 samples × 10 steps in 4 shards of one task each (--episodes-per-shard 2). */
function config() {
  const c = microConfig('seed')
  return {
    ...c,
    stage2: { ...c.stage2, iterations: 1, tasksPerStep: 4, groupSize: 2, maxEnvSteps: 10, miniBatchSize: 40 },
    evaluation: { ...c.evaluation, tasks: 2, every: 1 },
  }
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen({ host: '127.0.0.1', port }, () => server.close(() => resolve(true)))
  })
}

/** Two consecutive free ports (seedflow's metrics and the SDK's), from a range unlikely to be in use. */
async function freePortPair(taken: Set<number>): Promise<number> {
  for (let port = 20000 + (process.pid % 4000) * 2; port < 65000; port += 2) {
    if (taken.has(port) || !(await portFree(port)) || !(await portFree(port + 1))) continue
    taken.add(port)
    return port
  }
  throw new Error('no two consecutive free ports')
}

/** Waits for a worker to print that it polls its queues (its workers are created). */
async function polling(w: WorkerProcess, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (!alive(w)) throw new Error(`worker ${w.name} exited:\n${tail(w)}`)
    if ((await readFile(w.log, 'utf8').catch(() => '')).includes('polling task queue')) return
    await sleep(100)
  }
  throw new Error(`worker ${w.name} not polling after ${timeoutMs} ms:\n${tail(w)}`)
}

async function scrape(port: number): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`)
  assert.equal(response.status, 200, `GET :${port}/metrics`)
  return response.text()
}

function computedShards(w: WorkerProcess, phase: string): number[] {
  return countersOf(w)
    .filter((l) => l.phase === phase && l.event === 'computed' && l.iteration === 0)
    .map((l) => l.shard)
}

describe('control, rollout and train workers as separate processes (real dev server, S3 store)', () => {
  const dir = join(testServers().stateDir, `worker-roles-${process.pid}`)
  const workers: Record<string, { worker: WorkerProcess; port: number }> = {}
  let connection: Connection
  let handle: WorkflowHandle<typeof seedRun> | undefined
  let result: SeedRunResult
  let seconds: number

  before(async () => {
    mkdirSync(dir, { recursive: true })
    connection = await Connection.connect({ address: testServers().temporalAddress })
    const client = new Client({ connection })
    const taken = new Set<number>()
    const roles: Array<[string, string[], NodeJS.ProcessEnv?]> = [
      ['control', ['control', '--heartbeat-timeout', '10', '--episodes-per-shard', '2']],
      ['rollout-1', ['rollout', '--model-activities', '1']],
      ['rollout-2', ['rollout', '--model-activities', '1'], { SEEDFLOW_FAULT: 'rollout:mid-work:throw' }],
      ['train', ['train']],
    ]
    for (const [name, args, env] of roles) {
      const port = await freePortPair(taken)
      const worker = startWorker({
        dir,
        name,
        prefix: PREFIX,
        args: [...args, '--metrics-port', String(port)],
        ...(env ? { env } : {}),
      })
      workers[name] = { worker, port }
    }
    // both rollout workers poll before the fan-out starts, so that it can reach both
    for (const { worker } of Object.values(workers)) await polling(worker)
    const started = Date.now()
    handle = await client.workflow.start(seedRun, {
      taskQueue: TASK_QUEUES.control,
      workflowId: RUN_ID,
      args: [{ runId: RUN_ID, config: config() }],
      workflowExecutionTimeout: '5 minutes',
    })
    result = await handle.result()
    seconds = (Date.now() - started) / 1000
  })

  after(async () => {
    for (const { worker } of Object.values(workers)) await stopWorker(worker)
    if (handle) {
      const description = await handle.describe().catch(() => undefined)
      if (description?.status.name === 'RUNNING') await handle.terminate('worker-roles test ended').catch(() => {})
    }
    await connection?.close()
  })

  it('completes the run, the rollout workers sharing the fan-out', () => {
    assert.deepEqual(
      result.evaluations.map((e) => e.label),
      ['base', 'stage 1', 'iteration 0'],
    )
    const byWorker = Object.fromEntries(
      Object.entries(workers).map(([name, { worker }]) => [name, computedShards(worker, 'rollout')]),
    )
    assert.ok((byWorker['rollout-1'] ?? []).length > 0, `rollout-1 computed no shard: ${JSON.stringify(byWorker)}`)
    assert.ok((byWorker['rollout-2'] ?? []).length > 0, `rollout-2 computed no shard: ${JSON.stringify(byWorker)}`)
    assert.deepEqual(
      [...(byWorker['rollout-1'] ?? []), ...(byWorker['rollout-2'] ?? [])].sort(),
      Array.from({ length: SHARDS }, (_, s) => s),
    )
    assert.deepEqual(byWorker.control, [])
    assert.deepEqual(byWorker.train, [])
    // each queue's work on its own workers: model training on train, recording on control
    const computed = (name: string) => {
      const w = workers[name]
      assert.ok(w, name)
      return new Set(countersOf(w.worker).map((l) => l.phase))
    }
    assert.ok(computed('train').has('update') && computed('train').has('rescore'))
    assert.ok(computed('control').has('metrics') && !computed('control').has('update'))
    assert.ok(!computed('rollout-1').has('update') && !computed('rollout-2').has('update'))
    console.log(
      `worker-roles: run done in ${seconds.toFixed(1)} s; rollout shards by worker ${JSON.stringify(byWorker)}`,
    )
  })

  it('exports every metric the Grafana dashboard uses, from its workers', async () => {
    const wanted = dashboardMetricNames(DASHBOARD)
    assert.ok(wanted.filter((n) => n.startsWith('seedflow_')).length >= 10, `too few: ${wanted}`)
    assert.ok(wanted.some((n) => n.startsWith('temporal_')))
    const exported = new Set<string>()
    for (const { port } of Object.values(workers)) {
      for (const name of sampledMetricNames(await scrape(port))) exported.add(name)
      for (const name of sampledMetricNames(await scrape(port + 1))) exported.add(name)
    }
    const missing = wanted.filter((n) => !exported.has(n))
    assert.deepEqual(missing, [], `not exported by any worker; exported: ${[...exported].sort().join(' ')}`)
  })
})
