// A worker killed during a rollout costs only its unfinished shards. The real `seedflow worker` CLI runs as a
// separate process against the test's Temporal and S3 servers; a micro seedRun with 4 rollout shards starts; the
// moment one shard's manifest is in the store and the worker has started computing another (its counters file
// says so), the test SIGKILLs the worker, starts a second one and waits for the run to end. The two workers'
// counters files show that the shards finished before the kill were never computed again and the others exactly
// once, and Temporal's history that the interrupted shard was retried after a heartbeat timeout.
// Then, for each phase fault point of the wrapper (SEEDFLOW_FAULT, infra/faults.ts), one run whose workers SIGKILL
// themselves in turn at that point of snapshot, rollout, analyze, rescore, update and evaluate, each replaced by
// a new worker: the run completes, no shard whose manifest was written before a kill is computed again, and the
// rollouts, skills and final checkpoint have the bytes of an uninterrupted run with the same seeds. Last, the same
// run on workers with the native engine (--engine native), one killed in its update: the same bytes again.
import assert from 'node:assert/strict'
import { mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Client, Connection, type WorkflowHandle } from '@temporalio/client'
import { decodeTimeoutType } from '@temporalio/common'
import type { PhaseManifest } from '../../records/phase-manifest.ts'
import { getJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import type { S3ArtifactStore } from '../../store/s3-store.ts'
import type { CountersLine } from '../../workers/counters-file.ts'
import { TASK_QUEUES } from '../../workers/task-queues.ts'
import { seedRun } from '../../workflows/index.ts'
import type { SeedRunResult } from '../../workflows/seed-run.ts'
import { microConfig } from '../compute/micro.ts'
import { finishedPhases } from './pipeline-harness.ts'
import { testS3Store, testServers } from './servers.ts'
import { alive, countersOf, sleep, startWorker, stopWorker, tail, type WorkerProcess } from './worker-processes.ts'

const RUN_ID = `worker-kill-${process.pid}`
const PREFIX = `worker-kill-${process.pid}`
const SHARDS = 4
/** Short, so that the killed worker's rollout is retried within seconds (the default is 5 minutes). */
const HEARTBEAT_TIMEOUT_S = 5

/**
 * Micro model; one iteration of 4 tasks × 4 samples × 15 steps in 4 shards (one task each, --episodes-per-shard 4).
 * Long episodes of few samples: a shard takes about half a second (steps are sequential, samples batched), the
 * update over all 240 step samples a few seconds.
 */
function config() {
  const c = microConfig('seed')
  return {
    ...c,
    stage2: { ...c.stage2, iterations: 1, tasksPerStep: 4, groupSize: 4, maxEnvSteps: 15, miniBatchSize: 120 },
    evaluation: { ...c.evaluation, tasks: 2, every: 1 },
  }
}

function startKillTestWorker(
  dir: string,
  name: string,
  options: { prefix?: string; env?: NodeJS.ProcessEnv; episodesPerShard?: number } = {},
): WorkerProcess {
  const { prefix = PREFIX, env, episodesPerShard = 4 } = options
  return startWorker({
    dir,
    name,
    prefix,
    ...(env ? { env } : {}),
    args: [
      '--heartbeat-timeout',
      String(HEARTBEAT_TIMEOUT_S),
      '--episodes-per-shard',
      String(episodesPerShard),
      // one shard at a time: at the kill, some shards are finished and exactly one is running
      '--model-activities',
      '1',
    ],
  })
}

const kill = (w: WorkerProcess) => stopWorker(w, 'SIGKILL')

/** Rollout events of iteration 0, by event kind: the shard of each, in order. */
function rolloutShards(lines: CountersLine[], event: CountersLine['event']): number[] {
  return lines.filter((l) => l.phase === 'rollout' && l.iteration === 0 && l.event === event).map((l) => l.shard)
}

async function rolloutManifests(store: S3ArtifactStore, attempt = 0): Promise<number[]> {
  const found: number[] = []
  for (let shard = 0; shard < SHARDS; shard++)
    if (await store.head(keys.phaseManifest(RUN_ID, 0, 'rollout', shard, attempt))) found.push(shard)
  return found
}

/**
 * Waits until a rollout shard's manifest is in the store and the worker has started computing another shard
 * whose manifest is not: the worker is mid-rollout with work both done and in progress.
 */
async function killMoment(w: WorkerProcess, store: S3ArtifactStore, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (!alive(w)) throw new Error(`worker ${w.name} exited early:\n${tail(w)}`)
    const lines = countersOf(w)
    const done = new Set(rolloutShards(lines, 'computed'))
    const running = rolloutShards(lines, 'computing').filter((s) => !done.has(s))
    if (done.size > 0 && running.length > 0) {
      const manifests = new Set(await rolloutManifests(store))
      const interrupted = running.find((s) => !manifests.has(s))
      if ([...done].every((s) => manifests.has(s)) && interrupted !== undefined) return { done, interrupted }
    }
    await sleep(25)
  }
  throw new Error(`no kill moment within ${timeoutMs} ms; counters: ${JSON.stringify(countersOf(w))}\n${tail(w)}`)
}

describe('killing the worker during a rollout (separate worker processes, real dev server, S3 store)', () => {
  let dir: string
  let store: S3ArtifactStore
  let connection: Connection
  let client: Client
  let handle: WorkflowHandle<typeof seedRun> | undefined
  const workers: WorkerProcess[] = []

  before(async () => {
    dir = join(testServers().stateDir, `worker-kill-${process.pid}`)
    mkdirSync(dir, { recursive: true })
    store = testS3Store(PREFIX)
    connection = await Connection.connect({ address: testServers().temporalAddress })
    client = new Client({ connection })
  })

  after(async () => {
    // never leave a worker or a running workflow behind (later test files poll the same task queues)
    for (const w of workers) await kill(w)
    if (handle) {
      const description = await handle.describe().catch(() => undefined)
      if (description?.status.name === 'RUNNING')
        await handle.terminate('worker-kill test ended').catch(() => undefined)
    }
    await connection?.close()
    store?.destroy()
  })

  it('completes the run on a new worker, computing only the shards not finished before the kill', async () => {
    const started = Date.now()
    const first = startKillTestWorker(dir, 'worker-1')
    workers.push(first)
    handle = await client.workflow.start(seedRun, {
      taskQueue: TASK_QUEUES.control,
      workflowId: RUN_ID,
      args: [{ runId: RUN_ID, config: config() }],
      workflowExecutionTimeout: '3 minutes',
    })

    const { done, interrupted } = await killMoment(first, store, 90_000)
    await kill(first)
    const killedAt = Date.now()
    const finishedAtKill = await rolloutManifests(store)
    assert.ok(finishedAtKill.length < SHARDS, `the kill landed after the last shard: ${finishedAtKill}`)
    assert.ok(!finishedAtKill.includes(interrupted), `shard ${interrupted} finished before the kill landed`)

    const second = startKillTestWorker(dir, 'worker-2')
    workers.push(second)
    const result = await handle.result()
    const finishedAt = Date.now()
    assert.deepEqual(
      result.evaluations.map((e) => e.label),
      ['base', 'stage 1', 'iteration 0'],
    )

    const before = countersOf(first)
    const after = countersOf(second)
    // the first worker computed exactly the shards whose manifests were there at the kill (none half-recorded)
    assert.deepEqual(rolloutShards(before, 'computed').sort(), finishedAtKill)
    assert.ok([...done].every((s) => finishedAtKill.includes(s)))
    // the second worker never computed a finished shard again, and computed every other shard exactly once
    const computedAfter = rolloutShards(after, 'computed')
    for (const shard of finishedAtKill) {
      assert.ok(!rolloutShards(after, 'computing').includes(shard), `shard ${shard} was recomputed`)
    }
    assert.deepEqual(
      computedAfter.sort(),
      Array.from({ length: SHARDS }, (_, s) => s).filter((s) => !finishedAtKill.includes(s)),
    )
    // the same from the totals in the last line of each file
    const totals = after.at(-1)
    assert.equal(totals?.computed.rollout, SHARDS - finishedAtKill.length)
    assert.equal(before.at(-1)?.computed.rollout, finishedAtKill.length)
    for (const phase of ['warmstart', 'sft', 'snapshot'])
      assert.equal(totals?.computed[phase], undefined, `${phase} ran again after the kill`)
    // every rollout shard has one manifest, at attempt 0: nothing was recomputed under a new attempt
    assert.deepEqual(await rolloutManifests(store), [0, 1, 2, 3])
    assert.deepEqual(await rolloutManifests(store, 1), [])

    // Temporal's side: the interrupted shard's activity ran a second attempt after a heartbeat timeout
    const history = await client.workflow.getHandle(`${RUN_ID}/iter-0`).fetchHistory()
    const scheduled = new Map<string, number>()
    let retried: { attempt: number; timeout: string | undefined } | undefined
    for (const event of history.events ?? []) {
      const s = event.activityTaskScheduledEventAttributes
      if (s?.activityType?.name === 'rollout') {
        const input = JSON.parse(Buffer.from(s.input?.payloads?.[0]?.data ?? []).toString('utf8'))
        scheduled.set(String(event.eventId), input.shard)
        assert.equal(Number(s.heartbeatTimeout?.seconds), HEARTBEAT_TIMEOUT_S, 'the plan sets the heartbeat timeout')
      }
      const st = event.activityTaskStartedEventAttributes
      if (st && scheduled.get(String(st.scheduledEventId)) === interrupted) {
        const timeout = decodeTimeoutType(st.lastFailure?.timeoutFailureInfo?.timeoutType)
        retried = { attempt: st.attempt ?? 0, timeout }
      }
    }
    assert.ok(retried && retried.attempt >= 2, `shard ${interrupted}: ${JSON.stringify(retried)}`)
    assert.equal(retried.timeout, 'HEARTBEAT')

    console.log(
      `worker-kill: shards finished at the kill ${JSON.stringify(finishedAtKill)}, interrupted ${interrupted}; ` +
        `kill after ${((killedAt - started) / 1000).toFixed(1)} s, run done ${((finishedAt - killedAt) / 1000).toFixed(1)} s later`,
    )
  })
})

const FAULT_PHASES = ['snapshot', 'rollout', 'analyze', 'rescore', 'update', 'evaluate'] as const

/** Two rollout shards of one task × 2 samples × 5 steps each (the chain's workers plan 2 episodes per shard). */
function chainConfig() {
  const c = microConfig('seed')
  return {
    ...c,
    stage2: { ...c.stage2, iterations: 1, tasksPerStep: 2, groupSize: 2, maxEnvSteps: 5, miniBatchSize: 20 },
    evaluation: { ...c.evaluation, tasks: 2, every: 1 },
  }
}

/** A phase shard as finishedPhases names it, from a counters line. */
function shardName(l: CountersLine): string {
  const pad4 = (n: number) => String(n).padStart(4, '0')
  const at = [l.iteration === undefined ? undefined : pad4(l.iteration), l.phase, pad4(l.shard)]
  return at.filter(Boolean).join('/') + (l.attempt > 0 ? `+attempt-${l.attempt}` : '')
}

/** The sha256 of iteration 0's rollouts and skills (per shard) and of the final checkpoint. */
async function runBytes(store: S3ArtifactStore, runId: string, checkpoint: string) {
  const out: Record<string, string> = { checkpoint }
  for (const phase of ['rollout', 'analyze'] as const) {
    for (let shard = 0; shard < 2; shard++) {
      const manifest = (await getJson(store, keys.phaseManifest(runId, 0, phase, shard))) as PhaseManifest
      for (const [name, info] of Object.entries(manifest.outputs)) out[`${phase}/${shard}/${name}`] = info.sha256
    }
  }
  return out
}

describe('killing the worker at each phase fault point (one worker after another, real dev server, S3 store)', () => {
  const prefix = `${PREFIX}-chain`
  let dir: string
  let store: S3ArtifactStore
  let connection: Connection
  let client: Client
  const workers: WorkerProcess[] = []
  const handles: Array<WorkflowHandle<typeof seedRun>> = []
  let reference: Record<string, string>

  const start = (runId: string) => {
    const handle = client.workflow.start(seedRun, {
      taskQueue: TASK_QUEUES.control,
      workflowId: runId,
      args: [{ runId, config: chainConfig() }],
      workflowExecutionTimeout: '6 minutes',
    })
    return handle.then((h) => {
      handles.push(h)
      return h
    })
  }
  const worker = (name: string, fault?: string) => {
    const w = startKillTestWorker(dir, name, {
      prefix,
      episodesPerShard: 2,
      ...(fault ? { env: { SEEDFLOW_FAULT: fault } } : {}),
    })
    workers.push(w)
    return w
  }

  before(async () => {
    dir = join(testServers().stateDir, `worker-kill-chain-${process.pid}`)
    mkdirSync(dir, { recursive: true })
    store = testS3Store(prefix)
    connection = await Connection.connect({ address: testServers().temporalAddress })
    client = new Client({ connection })
    // the uninterrupted run
    const started = Date.now()
    const w = worker('reference')
    const handle = await start(`${RUN_ID}-reference`)
    const result = await handle.result()
    await kill(w)
    assert.ok(result.checkpoint, `reference run ended without a checkpoint (${result.outcome})`)
    reference = await runBytes(store, `${RUN_ID}-reference`, result.checkpoint.sha256)
    console.log(`worker-kill chain: uninterrupted run ${((Date.now() - started) / 1000).toFixed(1)} s`)
  })

  after(async () => {
    for (const w of workers) await kill(w)
    for (const handle of handles) {
      const description = await handle.describe().catch(() => undefined)
      if (description?.status.name === 'RUNNING') await handle.terminate('worker-kill test ended').catch(() => {})
    }
    await connection?.close()
    store?.destroy()
  })

  for (const point of ['mid-work', 'after-manifest'] as const) {
    it(`completes after a kill at ${point} of every phase, recomputing no finished shard, with the same bytes`, async () => {
      const runId = `${RUN_ID}-${point}`
      const started = Date.now()
      const handle = await start(runId)
      const done = handle.result()
      const finishedAtKill: Array<{ phase: string; finished: string[]; worker: WorkerProcess }> = []
      for (const phase of FAULT_PHASES) {
        const w = worker(`${point}-${phase}`, `${phase}:${point}`)
        const outcome = await Promise.race([w.exited.then(() => 'exited' as const), done.then(() => 'done' as const)])
        if (outcome === 'done') await kill(w)
        assert.equal(outcome, 'exited', `the run ended before the ${phase} fault fired:\n${tail(w)}`)
        assert.equal(w.proc.signalCode, 'SIGKILL', tail(w))
        assert.match(readFileSync(w.log, 'utf8'), new RegExp(`fault injected: ${phase}:${point} at ${phase} shard`))
        finishedAtKill.push({ phase, finished: await finishedPhases(store, runId), worker: w })
      }
      const last = worker(`${point}-last`)
      let result: SeedRunResult
      try {
        result = await done
      } finally {
        await kill(last) // the next case's faulty workers must be the only ones polling
      }
      const seconds = (Date.now() - started) / 1000
      assert.deepEqual(
        result.evaluations.map((e) => e.label),
        ['base', 'stage 1', 'iteration 0'],
      )
      // every shard whose manifest was there at a kill: no later worker started computing it again
      const later = [...finishedAtKill.map((k) => k.worker), last]
      for (const [i, { phase, finished }] of finishedAtKill.entries()) {
        const recomputed = later
          .slice(i + 1)
          .flatMap((w) => countersOf(w).filter((l) => l.event === 'computing' && finished.includes(shardName(l))))
        assert.deepEqual(recomputed.map(shardName), [], `after the ${phase} kill`)
        if (point === 'after-manifest') {
          const shards = finished.filter((f) => f.includes(`/${phase}/`))
          assert.ok(shards.length > 0, `${phase}: the manifest was written before the kill: ${finished}`)
        }
      }
      // nothing was recorded under a second attempt: an interrupted shard is recomputed under its first
      assert.deepEqual(
        (await finishedPhases(store, runId)).filter((f) => f.includes('+attempt')),
        [],
      )
      assert.ok(result.checkpoint, `run ended without a checkpoint (${result.outcome})`)
      assert.deepEqual(await runBytes(store, runId, result.checkpoint.sha256), reference)
      console.log(`worker-kill chain: ${point}, 6 kills, run done in ${seconds.toFixed(1)} s`)
    })
  }

  it('ends with the same bytes on a worker with the native engine (--engine native), killed mid-update', async () => {
    const runId = `${RUN_ID}-native`
    const started = Date.now()
    const handle = await start(runId)
    const done = handle.result()
    const native = (name: string, fault?: string) => {
      const w = startKillTestWorker(dir, name, {
        prefix,
        episodesPerShard: 2,
        env: { SEEDFLOW_ENGINE: 'native', ...(fault ? { SEEDFLOW_FAULT: fault } : {}) },
      })
      workers.push(w)
      return w
    }
    const first = native('native-killed', 'update:mid-work')
    const outcome = await Promise.race([first.exited.then(() => 'exited' as const), done.then(() => 'done' as const)])
    if (outcome === 'done') await kill(first)
    assert.equal(outcome, 'exited', `the run ended before the update fault fired:\n${tail(first)}`)
    assert.match(readFileSync(first.log, 'utf8'), /in the native engine/)
    const last = native('native-last')
    let result: SeedRunResult
    try {
      result = await done
    } finally {
      await kill(last)
    }
    assert.ok(result.checkpoint, `run ended without a checkpoint (${result.outcome})`)
    assert.deepEqual(await runBytes(store, runId, result.checkpoint.sha256), reference)
    console.log(`worker-kill chain: native engine, 1 kill, run done in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  })
})
