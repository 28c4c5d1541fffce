import { PhaseCounters } from '../activities/phase.ts'
import {
  describeProvider,
  type ExecutionProvider,
  ProviderUnavailableError,
  probeExecutionProvider,
} from '../engine/index.ts'
import { cudaRemedy } from '../infra/cuda.ts'
import { localPaths } from '../infra/local-stack.ts'
import { ensureNativeAddon } from '../infra/native.ts'
import { storeFromEnv } from '../store/from-env.ts'
import { assertValidRunId } from '../store/keys.ts'
import { countersFileListener } from '../workers/counters-file.ts'
import { armedFaults, phaseFaultHooks, watchMultipartUpload, withStoreFaults } from '../workers/faults.ts'
import { createLocalWorker } from '../workers/local.ts'
import { createWorkerMetrics, sdkMetricsTelemetry } from '../workers/metrics.ts'
import type { TaskQueueName } from '../workers/task-queues.ts'
import { quietRuntime, resolveTemporal, say } from './run-command.ts'

/** What each `seedflow worker <role>` polls (docs/design.md §10.1). */
export const WORKER_ROLES = {
  local: ['control', 'rollout', 'train'],
  control: ['control'],
  rollout: ['rollout'],
  train: ['train'],
} as const satisfies Record<string, readonly TaskQueueName[]>
export type WorkerRole = keyof typeof WORKER_ROLES

export interface WorkerCommandOptions {
  /** Serve this run only (its own queues, runTaskQueue): resumes a `seedflow run` that was interrupted. */
  run?: string
  countersFile?: string
  profile?: string
  heartbeatTimeout?: number
  episodesPerShard?: number
  modelActivities?: number
  metricsPort?: number
  metricsHost?: string
  executionProvider?: ExecutionProvider
  /** The tensor engine: onnxruntime-node's (default) or the native one (engine/native-engine.ts). */
  engine?: 'onnxruntime-node' | 'native'
}

/** The provider's probe, its refusal completed with what installs the missing library. */
async function probeProvider(provider: ExecutionProvider): Promise<void> {
  try {
    await probeExecutionProvider(provider)
  } catch (error) {
    if (error instanceof ProviderUnavailableError && error.missing)
      throw new ProviderUnavailableError(`${error.message}: ${cudaRemedy(error.missing)}`, error.missing)
    throw error
  }
}

export async function workerCommand(role: string | undefined, options: WorkerCommandOptions = {}): Promise<void> {
  const name = role ?? 'local'
  if (!(name in WORKER_ROLES))
    throw new Error(`unknown worker role ${JSON.stringify(name)}: one of ${Object.keys(WORKER_ROLES).join(', ')}`)
  const queues = WORKER_ROLES[name as WorkerRole]
  if (options.run !== undefined) assertValidRunId(options.run)
  const faults = armedFaults() // a bad SEEDFLOW_FAULT fails here, before any work
  const provider = options.executionProvider ?? 'cpu'
  if (provider !== 'cpu') await probeProvider(provider)
  const nativeAddon = options.engine === 'native' ? ensureNativeAddon() : undefined
  const { target } = await resolveTemporal()
  // fault injection (SEEDFLOW_FAULT) around the store and the phases; unarmed, each point returns at once
  const store = withStoreFaults(
    storeFromEnv(localPaths().artifacts, process.env, { onMultipartUpload: watchMultipartUpload }),
  )
  const host = options.metricsHost ?? '127.0.0.1'
  const port = options.metricsPort
  quietRuntime(port === undefined ? undefined : sdkMetricsTelemetry(host, port + 1))
  const metrics = port === undefined ? undefined : createWorkerMetrics(name)
  const served = metrics && port !== undefined ? await metrics.serve(host, port) : undefined
  const file = options.countersFile ? countersFileListener(options.countersFile) : undefined
  const counters =
    file || metrics
      ? new PhaseCounters((e, c) => {
          file?.(e, c)
          metrics?.onPhaseEvent(e)
        })
      : undefined
  const local = await createLocalWorker({
    connectionOptions: target.connectionOptions,
    namespace: target.namespace,
    store,
    phaseHooks: phaseFaultHooks,
    queues,
    ...(options.run !== undefined ? { runId: options.run } : {}),
    ...(counters ? { counters } : {}),
    ...(options.profile ? { profilePath: options.profile } : {}),
    ...(provider === 'cpu' ? {} : { executionProviders: [provider, 'cpu'] as const }),
    ...(nativeAddon ? { nativeAddon } : {}),
    ...(metrics ? { activityInterceptors: [metrics.activityInterceptor] } : {}),
    ...(options.heartbeatTimeout ? { heartbeatTimeoutSeconds: options.heartbeatTimeout } : {}),
    ...(options.episodesPerShard ? { episodesPerShard: options.episodesPerShard } : {}),
    ...(options.modelActivities ? { modelActivitySlots: options.modelActivities } : {}),
  })
  const serves = options.run === undefined ? 'the shared queues' : `run ${options.run} only`
  say(
    `${name} worker (pid ${process.pid}) polling task queue${queues.length > 1 ? 's' : ''} ${local.taskQueues.join(', ')} (${serves}; artifacts in ${store.location}); Ctrl-C stops it`,
  )
  if (local.residentQueue)
    say(`its own queue ${local.residentQueue}: the train phases of the policies it keeps loaded come there first`)
  if (provider !== 'cpu' || nativeAddon)
    say(
      `models run on ${describeProvider(provider)}${nativeAddon ? ', in the native engine (kept tensors stay where they run)' : ''}`,
    )
  if (served && port !== undefined)
    say(`metrics at http://${host}:${served.port}/metrics, the Temporal SDK's at http://${host}:${port + 1}/metrics`)
  if (options.countersFile) say(`phase counters appended to ${options.countersFile}`)
  if (options.profile) say(`profile written to ${options.profile} after each activity`)
  if (faults.length > 0) say(`fault injection armed: ${faults.map((f) => f.spec).join(', ')}`)
  try {
    await Promise.all(local.workers.map((w) => w.run())) // the SDK shuts down gracefully on SIGINT / SIGTERM
  } finally {
    await local.close()
    await served?.close()
  }
}
