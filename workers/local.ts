import { randomUUID } from 'node:crypto'
import { availableParallelism } from 'node:os'
import { fileURLToPath } from 'node:url'
import {
  type ActivityInterceptorsFactory,
  NativeConnection,
  type NativeConnectionOptions,
  Worker,
} from '@temporalio/worker'
import { createActivities } from '../activities/index.ts'
import type { PhaseCounters, PhaseHooks } from '../activities/phase.ts'
import { createWorkerEngine, type Engine, type ExecutionProvider } from '../engine/index.ts'
import { createNativeEngine } from '../engine/native-engine.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { boundedFailures } from './bounded-failures.ts'
import { profileRecorder } from './profile.ts'
import {
  residentQueueOf,
  runTaskQueue,
  TASK_QUEUES,
  type TaskQueueName,
  type TaskQueues,
  taskQueuesOf,
} from './task-queues.ts'

export const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url))

export interface LocalWorkerOptions {
  connectionOptions: NativeConnectionOptions
  namespace: string
  store: ArtifactStore
  /**
   * The one run this worker serves (`seedflow run`, `seedflow worker --run <id>`): it polls that run's own queues
   * (runTaskQueue(runId) and the queues derived from it) and nothing else. Absent: the shared queues, TASK_QUEUES.
   */
  runId?: string
  /** The task queues to poll (default all three: the all-in-one worker); workflows run on the control queue only. */
  queues?: readonly TaskQueueName[]
  /** Execution providers of the default engine, in order of preference (default CPU). */
  executionProviders?: readonly ExecutionProvider[]
  /**
   * The default engine is the native one (engine/native-engine.ts, this built addon: kept tensors in memory the
   * engine owns, a device's with a device provider) instead of onnxruntime-node's in a worker thread.
   */
  nativeAddon?: string
  /** Activity interceptors of every worker (metrics). */
  activityInterceptors?: ActivityInterceptorsFactory[]
  /**
   * The tensor engine of every model phase; default: a worker-thread engine (closed by `close`) with
   * `SEEDFLOW_ORT_THREADS` ORT threads, else one per CPU core (1 makes the worker bit-reproducible).
   */
  engine?: Engine
  counters?: PhaseCounters
  /** Around every phase shard the activities compute (fault injection: workers/faults.ts's phaseFaultHooks). */
  phaseHooks?: PhaseHooks
  /** Episodes per rollout shard when planning a run (default 64). */
  episodesPerShard?: number
  /** Heartbeat timeout of the model-bound activities of runs this worker plans (RunPlan); default 5 minutes. */
  heartbeatTimeoutSeconds?: number
  /**
   * Activities run at once on each model-bound queue (rollout, train); default: the SDK's (no practical cap).
   * The default engine is one worker thread, which concurrent activities share; 1 runs shards one after the
   * other, so each finishes (and records its manifest) sooner and a crashed worker leaves more of them done.
   */
  modelActivitySlots?: number
  /** Where this worker writes its profile (workers/profile.ts): wall time and memory per activity and model run. */
  profilePath?: string
}

export interface LocalWorker {
  /** The first worker: the control worker (workflows and control activities) when it polls the control queue. */
  worker: Worker
  /** The task queues of its roles, in the order of `workers`. */
  taskQueues: string[]
  /** The queue only this worker polls (a train worker's), last in `workers`: docs/design.md §10.1. */
  residentQueue?: string
  /** One per polled task queue (all three by default, then the resident queue), sharing one connection. */
  workers: Worker[]
  connection: NativeConnection
  engine: Engine
  /** Runs every worker until `promise` settles, then shuts them all down (once: a Worker runs only once). */
  runUntil<T>(promise: Promise<T>): Promise<T>
  /** Closes the connection and, when this created it, the engine (after the workers stopped). */
  close(): Promise<void>
}

/**
 * One Worker per polled task queue over one connection: all three for the all-in-one worker of the embedded
 * default, one for a control, rollout or train worker. Workflows only on the control queue, every activity on
 * each (the workflows' proxies decide which queue an activity goes to).
 */
export async function createLocalWorker(options: LocalWorkerOptions): Promise<LocalWorker> {
  const connection = await NativeConnection.connect(options.connectionOptions)
  const ownEngine = options.engine === undefined
  const profile = options.profilePath ? profileRecorder(options.profilePath) : undefined
  const inner =
    options.engine ??
    lazyEngine(() => {
      const config = {
        threads: ortThreads(),
        ...(options.executionProviders ? { executionProviders: options.executionProviders } : {}),
      }
      return options.nativeAddon
        ? createNativeEngine({ ...config, addon: options.nativeAddon })
        : createWorkerEngine(config)
    })
  const engine = profile ? profile.wrap(inner) : inner
  const queues = options.queues ?? ['control', 'rollout', 'train']
  const names = workerTaskQueues(options.runId)
  // a train worker also polls a queue of its own, where the phases that want the policies it keeps find it
  const residentQueue = queues.includes('train') ? residentQueueOf(names.train, randomUUID().slice(0, 8)) : undefined
  try {
    const activities = createActivities({
      store: options.store,
      engine,
      ...(options.counters ? { counters: options.counters } : {}),
      ...(options.phaseHooks ? { phaseHooks: options.phaseHooks } : {}),
      ...(options.episodesPerShard ? { episodesPerShard: options.episodesPerShard } : {}),
      ...(options.heartbeatTimeoutSeconds ? { heartbeatTimeoutSeconds: options.heartbeatTimeoutSeconds } : {}),
      ...(residentQueue ? { residentQueue } : {}),
    })
    const common = {
      connection,
      namespace: options.namespace,
      activities,
      // outermost first: every failure, also one another interceptor throws, leaves the worker bounded
      interceptors: {
        activity: [
          boundedFailures,
          ...(options.activityInterceptors ?? []),
          ...(profile ? [profile.activityInterceptor] : []),
        ],
      },
    }
    const model = {
      ...common,
      ...(options.modelActivitySlots ? { maxConcurrentActivityTaskExecutions: options.modelActivitySlots } : {}),
    }
    if (queues.length === 0) throw new Error('a worker needs at least one task queue')
    const workers: Worker[] = []
    for (const queue of queues) {
      workers.push(
        queue === 'control'
          ? await Worker.create({ ...common, taskQueue: names.control, workflowsPath: WORKFLOWS_PATH })
          : await Worker.create({ ...model, taskQueue: names[queue] }),
      )
    }
    if (residentQueue) workers.push(await Worker.create({ ...model, taskQueue: residentQueue }))
    const worker = workers[0] as Worker
    return {
      worker,
      taskQueues: queues.map((q) => names[q]),
      ...(residentQueue ? { residentQueue } : {}),
      workers,
      connection,
      engine,
      async runUntil<T>(promise: Promise<T>): Promise<T> {
        const [first, ...rest] = workers as [Worker, ...Worker[]]
        const others = rest.map((w) => w.run())
        try {
          return await first.runUntil(promise)
        } finally {
          for (const w of rest) if (w.getState() === 'RUNNING') w.shutdown()
          await Promise.allSettled(others)
        }
      },
      async close() {
        profile?.close()
        await connection.close()
        if (ownEngine) await engine.close()
      },
    }
  } catch (error) {
    profile?.close()
    await connection.close()
    if (ownEngine) await engine.close()
    throw error
  }
}

/** The queues a worker for `runId` polls: that run's own (runTaskQueue), or the shared ones without a run. */
export function workerTaskQueues(runId?: string): TaskQueues {
  return taskQueuesOf(runId === undefined ? TASK_QUEUES.control : runTaskQueue(runId))
}

/** ORT intra-op threads of a worker's own engine: SEEDFLOW_ORT_THREADS, else the number of CPU cores. */
export function ortThreads(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.SEEDFLOW_ORT_THREADS
  if (raw === undefined || raw === '') return availableParallelism()
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`SEEDFLOW_ORT_THREADS must be a positive integer, got ${JSON.stringify(raw)}`)
  return n
}

/**
 * An engine whose worker thread starts on the first model load, so a worker that only records runs never
 * starts one (a started engine thread must be closed for the process to exit).
 */
function lazyEngine(create: () => Engine): Engine {
  let engine: Engine | undefined
  const get = () => {
    engine ??= create()
    return engine
  }
  return {
    load: (model) => get().load(model),
    run: (model, feeds, options) => get().run(model, feeds, options),
    keep: (feeds) => get().keep(feeds),
    read: (kept, names) => get().read(kept, names),
    allocate: (shapes) => get().allocate(shapes),
    forget: async (kept) => {
      if (engine) await engine.forget(kept)
    },
    release: async (model) => {
      if (engine) await engine.release(model)
    },
    close: async () => {
      if (engine) await engine.close()
    },
  }
}
