import { readFile } from 'node:fs/promises'
import { Client, type ConnectionOptions, WorkflowExecutionAlreadyStartedError } from '@temporalio/client'
import { DefaultLogger, Runtime, type RuntimeOptions } from '@temporalio/worker'
import { bounded, boundedMessage } from '../infra/bounded-text.ts'
import { localPaths, upTemporal } from '../infra/local-stack.ts'
import { envLabel, parseRunConfig, type RunConfig } from '../seed/config.ts'
import { cpuSokobanPreset } from '../seed/presets/cpu.ts'
import type { ArtifactStore, StoreIdentity } from '../store/artifact-store.ts'
import { storeFromEnv } from '../store/from-env.ts'
import { FsArtifactStore } from '../store/fs-store.ts'
import { assertValidRunId } from '../store/keys.ts'
import { type TemporalTarget, temporalTarget } from '../workers/connection.ts'
import { phaseFaultHooks, watchMultipartUpload, withStoreFaults } from '../workers/faults.ts'
import { createLocalWorker, type LocalWorker } from '../workers/local.ts'
import { runTaskQueue } from '../workers/task-queues.ts'
import { type Evaluation, type SeedRunResult, seedRun } from '../workflows/seed-run.ts'
import { formatEvaluation, watchRun } from './progress.ts'
import { CliError, connectClient } from './run-client.ts'
import { checkRunSettings, checkStoreAccess } from './run-preflight.ts'
import { awaitRunResult } from './run-result.ts'
import { watchReachable } from './temporal-connection.ts'

export function say(line: string): void {
  process.stdout.write(`seedflow: ${line}\n`)
}

/** The run configuration: the file's (every bad field listed) or the CPU sokoban preset of the tiny model. */
async function readConfig(path: string | undefined): Promise<RunConfig> {
  if (path === undefined) return cpuSokobanPreset('seed')
  let value: unknown
  try {
    value = JSON.parse(await readFile(path, 'utf8'))
  } catch (error) {
    throw new Error(`cannot read the run configuration ${path}: ${(error as Error).message}`)
  }
  const parsed = parseRunConfig(value)
  if (!parsed.ok) throw new Error(`${path} is not a valid run configuration:\n  ${parsed.problems.join('\n  ')}`)
  return parsed.config
}

function defaultRunId(now = new Date()): string {
  return `run-${now.toISOString().slice(0, 19).replace(/[-:]/g, '').replace('T', '-')}`
}

/** The embedded dev server (started or reused) unless TEMPORAL_ADDRESS & co. name a cluster. */
export async function resolveTemporal(): Promise<{ target: TemporalTarget; uiUrl?: string }> {
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

/**
 * Warnings and errors only; activity-only workers' "no workflows registered" notice is expected here. Telemetry
 * options (the SDK's metrics endpoint) go in the same, single install: before any worker or connection exists.
 */
export function quietRuntime(telemetryOptions?: RuntimeOptions['telemetryOptions']): void {
  Runtime.install({
    ...(telemetryOptions ? { telemetryOptions } : {}),
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
  checkRunSettings(config) // SEEDFLOW_FAULT and the annotator's key: before any server or workflow starts
  say(
    `run ${runId}: ${config.algorithm} on ${envLabel(config.env)}, ${config.stage2.iterations} iterations × ${config.stage2.tasksPerStep} tasks × ${config.stage2.groupSize} samples` +
      (configPath ? ` (${configPath})` : ' (the CPU sokoban preset; `seedflow run <config.json>` for another)'),
  )
  const { target, uiUrl } = await resolveTemporal()
  const store = storeFromEnv(localPaths().artifacts, process.env, { onMultipartUpload: watchMultipartUpload })
  const identity = await checkStoreAccess(store)
  say(`artifacts in ${store.location} (store ${identity.id}: the run lives there, workers of another store refuse it)`)
  quietRuntime()
  const { connection, close } = await connectClient(target.connectionOptions as ConnectionOptions, target.remote)
  try {
    const client = new Client({ connection, namespace: target.namespace })
    if (uiUrl) say(`Web UI: ${uiUrl}/namespaces/${target.namespace}/workflows/${encodeURIComponent(runId)}`)
    // The workflow first, the worker after: a worker that was created but never ran holds the connection for
    // good (the SDK refuses to close it), so a refused start must come before any worker exists.
    say(`starting workflow seedRun ${runId}`)
    const handle = await startRun(client, runId, config, identity, target.connectionOptions.address)
    let local: LocalWorker
    // A server that dies now fails the Worker only after its own ~10 s of connect retries: the watch says so sooner
    const reachable = watchReachable(target.connectionOptions as ConnectionOptions)
    try {
      const creating = createLocalWorker({
        connectionOptions: target.connectionOptions,
        namespace: target.namespace,
        // fault injection (SEEDFLOW_FAULT) around the worker's store and phases, as in `seedflow worker`
        store: withStoreFaults(store),
        phaseHooks: phaseFaultHooks,
        runId, // its own run only: another run's work on the shared queues is never taken (nor interrupted)
        // where its wall time and memory go, per activity and model run (workers/profile.ts)
        ...(process.env.SEEDFLOW_PROFILE ? { profilePath: process.env.SEEDFLOW_PROFILE } : {}),
      })
      creating.catch(() => {}) // settles after the watch has won: nothing is left to tell
      local = await Promise.race([creating, reachable.lost])
    } catch (error) {
      const reason = `seedflow run could not start its worker: ${boundedMessage(error)}`
      throw new CliError(`${reason}; ${await endUnserved(client, runId, reason, target.connectionOptions.address)}`)
    } finally {
      await reachable.stop()
    }
    say(`worker on task queues ${local.taskQueues.join(', ')} (run ${runId} only)`)
    try {
      const watcher = watchRun(client, runId, say)
      // Ctrl-C (or a TERM): the SDK shuts the worker down; the run itself goes on, on the server
      let interrupted: NodeJS.Signals | undefined
      const onSignal = (signal: NodeJS.Signals) => {
        interrupted ??= signal
      }
      for (const signal of INTERRUPTS) process.once(signal, onSignal)
      let result: SeedRunResult
      // the wait for the result ends with the command (cli/run-result.ts: checks, not one long poll): left
      // running, a call outlived the connection (and its retries ran into the closed channel) or held the exit
      const done = new AbortController()
      try {
        // The watcher stops as soon as the workflow closes, while the worker still runs: a query sent after the
        // only worker has shut down would wait for one; the final evaluations come from the result.
        result = await local.runUntil(
          awaitRunResult<SeedRunResult>(client, runId, handle, done.signal).then(async (r) => {
            await watcher.stop(r.evaluations)
            return r
          }),
        )
      } catch (error) {
        if (!interrupted) throw error
        process.exitCode = 130
        throw new CliError(
          `interrupted (${interrupted}): run ${runId} goes on at ${target.connectionOptions.address ?? 'the Temporal server'} ` +
            `without this worker; \`seedflow worker --run ${runId}\` continues it, \`seedflow abort ${runId}\` ends it, \`seedflow status ${runId}\` shows it`,
        )
      } finally {
        done.abort()
        for (const signal of INTERRUPTS) process.off(signal, onSignal)
        await watcher.stop() // a failed run, or Ctrl-C (the worker shut down first); polls no more either way
      }
      printSummary(
        runId,
        result,
        // an imported model with warm-start settings is warm-started too: its base is not the imported weights
        config.model.kind === 'builtin' || config.warmstart ? 'warm-start' : 'imported model',
        store,
        uiUrl ? `${uiUrl}/namespaces/${target.namespace}` : undefined,
      )
      if (!target.remote) say('the dev server keeps running for the Web UI; stop it with: npx seedflow down')
    } finally {
      await local.close()
    }
  } finally {
    await close()
  }
}

const INTERRUPTS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM']

/** How long the terminate of a run that got no worker may take (the server may be the reason). */
const TERMINATE_TIMEOUT_MS = 2000

/** Terminates a run whose worker did not start; says whether it did, and what to do when it did not. */
async function endUnserved(client: Client, runId: string, reason: string, address: string | undefined) {
  try {
    await client.withDeadline(Date.now() + TERMINATE_TIMEOUT_MS, () =>
      client.workflow.getHandle(runId).terminate(bounded(reason, 1000)),
    )
    return `run ${runId} terminated`
  } catch (error) {
    const at = address ?? 'the Temporal server'
    const cause = error instanceof Error && error.cause ? `: ${boundedMessage(error.cause)}` : ''
    return (
      `run ${runId} was NOT terminated (${boundedMessage(error)}${cause}): it stays RUNNING on ${at} with no worker; once ` +
      `that server answers, \`seedflow worker --run ${runId}\` continues it or \`temporal workflow terminate ` +
      `--workflow-id ${runId}\` ends it`
    )
  }
}

/** Starts the seedRun workflow; a run of that id that is still running, or a refused start, is a CliError. */
async function startRun(
  client: Client,
  runId: string,
  config: RunConfig,
  store: StoreIdentity,
  address: string | undefined,
) {
  try {
    return await client.workflow.start(seedRun, {
      taskQueue: runTaskQueue(runId), // the run's own queues: only its own workers serve it
      workflowId: runId,
      args: [{ runId, config, store }],
    })
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError)
      throw new CliError(
        `a run named ${runId} is already running on ${address ?? 'the Temporal server'}: \`seedflow status ${runId}\` shows it ` +
          `(\`seedflow worker --run ${runId}\` serves it if its \`seedflow run\` was interrupted); start another with --run-id <id>`,
      )
    throw new CliError(`Temporal refused to start run ${runId}: ${boundedMessage(error)}`)
  }
}

/** The "held-out success" table `seedflow run` ends with: its heading and one line per evaluation. */
export function heldOutTable(runId: string, evaluations: readonly Evaluation[], baseName: string): string[] {
  const last = evaluations.at(-1)
  const named = (label: string) => (label === 'base' ? baseName : label)
  // the last point's evaluations (one per split) are the final ones
  const rows = evaluations.map(
    (e) =>
      [
        `${named(e.label)}${last && e.label === last.label && e.iteration >= 0 ? ' (final)' : ''}`,
        formatEvaluation(e),
      ] as const,
  )
  const width = Math.max(...rows.map((r) => r[0].length), 10)
  return [`held-out success of run ${runId}:`, ...rows.map(([label, value]) => `  ${label.padEnd(width)}  ${value}`)]
}

/** Held-out success of the warm-start (base), Stage-1 and final checkpoints, and where to look. */
function printSummary(
  runId: string,
  result: SeedRunResult,
  baseName: string,
  store: ArtifactStore,
  ui: string | undefined,
): void {
  process.stdout.write(`\n${heldOutTable(runId, result.evaluations, baseName).join('\n')}\n\n`)
  if (result.outcome === 'aborted') say(`run ${runId} was aborted: ${result.aborted}`)
  const checkpoint = result.checkpoint
  if (checkpoint) say(`final checkpoint: ${checkpoint.prefix} (model sha256 ${checkpoint.sha256.slice(0, 12)}…)`)
  if (store instanceof FsArtifactStore) say(`artifacts: ${store.root}/runs/${runId}/`)
  if (ui) say(`Web UI: ${ui}/workflows/${encodeURIComponent(runId)}`)
  say(`curves, losses and the skills it wrote: npx seedflow report ${runId} --open  (or: npx seedflow ui)`)
}
