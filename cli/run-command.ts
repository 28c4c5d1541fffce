import { readFile } from 'node:fs/promises'
import { Client, Connection, type ConnectionOptions } from '@temporalio/client'
import { DefaultLogger, Runtime } from '@temporalio/worker'
import { localPaths, upTemporal } from '../infra/local-stack.ts'
import { storeFromEnv } from '../store/from-env.ts'
import { FsArtifactStore } from '../store/fs-store.ts'
import { assertValidRunId } from '../store/keys.ts'
import { type TemporalTarget, temporalTarget } from '../workers/connection.ts'
import { createLocalWorker } from '../workers/local.ts'
import { TASK_QUEUES } from '../workers/task-queues.ts'
import { registerRun } from '../workflows/index.ts'

/** Until the pipeline lands, the main job records this configuration as the run's record. */
const DEFAULT_CONFIG = { env: 'sokoban', algorithm: 'seed', preset: 'tiny' }

function say(line: string): void {
  process.stdout.write(`seedflow: ${line}\n`)
}

async function readConfig(path: string | undefined): Promise<Record<string, unknown>> {
  if (path === undefined) return DEFAULT_CONFIG
  let value: unknown
  try {
    value = JSON.parse(await readFile(path, 'utf8'))
  } catch (error) {
    throw new Error(`cannot read the run configuration ${path}: ${(error as Error).message}`)
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new Error(`${path} must hold a JSON object`)
  return value as Record<string, unknown>
}

function defaultRunId(now = new Date()): string {
  return `run-${now.toISOString().slice(0, 19).replace(/[-:]/g, '').replace('T', '-')}`
}

/** The embedded dev server (started or reused) unless TEMPORAL_ADDRESS & co. name a cluster. */
async function resolveTemporal(): Promise<{ target: TemporalTarget; uiUrl?: string }> {
  const probe = temporalTarget('')
  if (probe.remote) {
    say(`Temporal cluster ${probe.connectionOptions.address} namespace ${probe.namespace}`)
    return { target: probe }
  }
  const server = await upTemporal()
  say(
    `Temporal dev server ${server.reused ? 'reused' : 'started'} at ${server.address} (pid ${server.pid}, state in ${localPaths().stateDir})`,
  )
  return { target: temporalTarget(server.address), ...(server.uiUrl ? { uiUrl: server.uiUrl } : {}) }
}

/** Warnings and errors only; activity-only workers' "no workflows registered" notice is expected here. */
function quietRuntime(): void {
  Runtime.install({
    logger: new DefaultLogger('WARN', (entry) => {
      if (entry.message.startsWith('No workflows registered')) return
      const meta = entry.meta && Object.keys(entry.meta).length > 0 ? ` ${JSON.stringify(entry.meta)}` : ''
      process.stderr.write(`seedflow: ${entry.level.toLowerCase()}: ${entry.message}${meta}\n`)
    }),
  })
}

export async function runCommand(configPath: string | undefined, options: { runId?: string }): Promise<void> {
  const config = await readConfig(configPath)
  const runId = options.runId ?? defaultRunId()
  assertValidRunId(runId)
  const { target, uiUrl } = await resolveTemporal()
  const store = storeFromEnv(localPaths().artifacts)
  say(`artifacts in ${store.location}`)
  quietRuntime()
  const local = await createLocalWorker({
    connectionOptions: target.connectionOptions,
    namespace: target.namespace,
    store,
  })
  const connection = await Connection.connect(target.connectionOptions as ConnectionOptions)
  try {
    const client = new Client({ connection, namespace: target.namespace })
    say(`worker on task queue ${TASK_QUEUES.control}; starting workflow registerRun ${runId}`)
    const ref = await local.runUntil(
      client.workflow.execute(registerRun, {
        taskQueue: TASK_QUEUES.control,
        workflowId: runId,
        args: [{ runId, config }],
      }),
    )
    say(`run ${runId} recorded: ${ref.key} (${ref.bytes} bytes, sha256 ${ref.sha256})`)
    if (uiUrl) say(`Web UI: ${uiUrl}/namespaces/${target.namespace}/workflows/${encodeURIComponent(runId)}`)
    if (store instanceof FsArtifactStore) say(`artifact: ${store.root}/${ref.key}`)
    if (!target.remote) say('the dev server keeps running for the Web UI; stop it with: npx seedflow down')
  } finally {
    await connection.close()
    await local.close()
  }
}

export async function workerCommand(): Promise<void> {
  const { target } = await resolveTemporal()
  const store = storeFromEnv(localPaths().artifacts)
  quietRuntime()
  const local = await createLocalWorker({
    connectionOptions: target.connectionOptions,
    namespace: target.namespace,
    store,
  })
  say(
    `worker polling task queues ${Object.values(TASK_QUEUES).join(', ')} (artifacts in ${store.location}); Ctrl-C stops it`,
  )
  try {
    await Promise.all(local.workers.map((w) => w.run())) // the SDK shuts down gracefully on SIGINT / SIGTERM
  } finally {
    await local.close()
  }
}
