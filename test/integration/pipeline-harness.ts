// What the end-to-end pipeline tests share: the all-in-one local worker with the real pipeline activities on
// the test servers (its own S3 prefix, a one-thread engine, phase counters), a client, and readers of what a
// run left in the store.
import { Client, Connection } from '@temporalio/client'
import { type ActivityInterceptorsFactory, DefaultLogger, type Logger, Runtime } from '@temporalio/worker'
import { PhaseCounters } from '../../activities/phase.ts'
import { createLocalEngine, type Engine } from '../../engine/index.ts'
import type { AlgorithmRow } from '../../seed/algorithms.ts'
import type { ArtifactStore } from '../../store/artifact-store.ts'
import { keys } from '../../store/keys.ts'
import type { S3ArtifactStore } from '../../store/s3-store.ts'
import { createLocalWorker } from '../../workers/local.ts'
import { TASK_QUEUES } from '../../workers/task-queues.ts'
import { seedRun } from '../../workflows/index.ts'
import type { SeedRunResult } from '../../workflows/seed-run.ts'
import { testS3Store, testServers } from './servers.ts'

export interface PipelineHarness {
  store: S3ArtifactStore
  engine: Engine
  counters: PhaseCounters
  client: Client
  /** Runs seedRun to its end on the control queue (workflow id = run id). */
  run(runId: string, config: unknown): Promise<SeedRunResult>
  /** Stops the workers and closes the engine, the connections and the store. */
  close(): Promise<void>
}

/**
 * Workers for all three task queues (2 episodes per rollout shard), storing under `prefix`; `activityInterceptors`
 * inside the worker's own (tests that make activities fail); `logger` the SDK's (tests that read the logs);
 * `workerStore` what the workers store through (tests that make writes fail).
 */
export async function startPipeline(
  prefix: string,
  options: {
    activityInterceptors?: ActivityInterceptorsFactory[]
    logger?: Logger
    /** The store the workers write through (a wrapper that injects faults); the harness reads the plain one. */
    workerStore?: (store: S3ArtifactStore) => ArtifactStore
  } = {},
): Promise<PipelineHarness> {
  Runtime.install({ logger: options.logger ?? new DefaultLogger('WARN') })
  const { temporalAddress } = testServers()
  const store = testS3Store(prefix)
  const engine = createLocalEngine({ threads: 1 })
  const counters = new PhaseCounters()
  const local = await createLocalWorker({
    connectionOptions: { address: temporalAddress },
    namespace: 'default',
    store: options.workerStore ? options.workerStore(store) : store,
    engine,
    counters,
    episodesPerShard: 2,
    ...(options.activityInterceptors ? { activityInterceptors: options.activityInterceptors } : {}),
  })
  const running = local.workers.map((w) => w.run())
  const connection = await Connection.connect({ address: temporalAddress })
  const client = new Client({ connection })
  return {
    store,
    engine,
    counters,
    client,
    run: (runId, config) =>
      client.workflow.execute(seedRun, {
        taskQueue: TASK_QUEUES.control,
        workflowId: runId,
        args: [{ runId, config }],
        workflowExecutionTimeout: '10 minutes',
      }),
    async close() {
      for (const w of local.workers) w.shutdown()
      await Promise.all(running)
      await local.close()
      await engine.close()
      await connection.close()
      store.destroy()
    },
  }
}

const pad4 = (n: number) => String(n).padStart(4, '0')

/**
 * The phase shards one iteration of `row` finishes, named as `finishedPhases` names them: the row's phases
 * (rollout and analyze once per shard), the iteration's metrics (recordIteration) and its evaluation.
 */
export function iterationPhases(k: number, row: AlgorithmRow, shards: number): string[] {
  const out: string[] = []
  for (const phase of row.phases) {
    const fanOut = phase === 'rollout' || phase === 'analyze'
    for (let shard = 0; shard < (fanOut ? shards : 1); shard++) out.push(`${pad4(k)}/${phase}/${pad4(shard)}`)
  }
  return [...out, `${pad4(k)}/metrics/0000`, `${pad4(k)}/evaluate/0000`]
}

/** The evaluations of a run as [label, iteration] pairs. */
export function evaluationLabels(result: SeedRunResult): Array<[string, number]> {
  return result.evaluations.map((e) => [e.label, e.iteration])
}

export async function allKeys(store: S3ArtifactStore, prefix: string): Promise<string[]> {
  const out: string[] = []
  let cursor: string | undefined
  do {
    const page = await store.list(prefix, cursor ? { cursor } : {})
    out.push(...page.objects.map((o) => o.key))
    cursor = page.nextCursor
  } while (cursor)
  return out
}

/**
 * The phase shards that finished in a run, from its manifests, sorted: `sft`, `evaluate/0001`,
 * `0000/rollout/0001` (iteration / phase / shard); attempts beyond the first are marked `+attempt-k`.
 */
export async function finishedPhases(store: S3ArtifactStore, runId: string): Promise<string[]> {
  const prefix = keys.runPrefix(runId)
  const phases: string[] = []
  for (const key of await allKeys(store, prefix)) {
    const m = /^(?:iterations\/(\d{4})\/)?([a-z0-9]+)\/(\d{4})(\.attempt-\d+)?\.manifest\.json$/.exec(
      key.slice(prefix.length),
    )
    if (!m) continue
    const [, iteration, phase, shard, attempt] = m
    phases.push([iteration, phase, shard].filter(Boolean).join('/') + (attempt ? `+${attempt.slice(1)}` : ''))
  }
  return phases.sort()
}
