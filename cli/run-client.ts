// The client side of the operator commands (status, retry, pause, resume, abort): a connection to the run's
// Temporal server (TEMPORAL_ADDRESS & co., else the local dev server of `seedflow up`) and the run's workflow,
// with clear errors for an unreachable server and an unknown run. Starts nothing.
import { Client, type ConnectionOptions, type WorkflowHandle, WorkflowNotFoundError } from '@temporalio/client'
import { LOCAL_PORTS, localPaths } from '../infra/local-stack.ts'
import { findRunningTemporal } from '../infra/temporal-server.ts'
import { assertValidRunId } from '../store/keys.ts'
import { temporalTarget } from '../workers/connection.ts'
import type { seedRun } from '../workflows/seed-run.ts'
import { connectTemporal, TemporalUnreachableError } from './temporal-connection.ts'

export class CliError extends Error {
  override name = 'CliError'
}

export interface RunClient {
  client: Client
  address: string
  handle: WorkflowHandle<typeof seedRun>
  close(): Promise<void>
}

const UP_HINT = 'start the local server with `seedflow up`, or point seedflow at a cluster with TEMPORAL_ADDRESS'

/** What to do when the server of `remote` (TEMPORAL_ADDRESS & co.) or the local dev server does not answer. */
export function unreachableHint(remote: boolean): string {
  return remote
    ? 'start that server, or unset TEMPORAL_ADDRESS (and TEMPORAL_PROFILE) to use the local dev server (`seedflow up` starts it)'
    : UP_HINT
}

/** A client connection; a CliError naming the address and what to do when nothing answers there. */
export async function connectClient(options: ConnectionOptions, remote: boolean) {
  try {
    return await connectTemporal(options, unreachableHint(remote))
  } catch (error) {
    if (error instanceof TemporalUnreachableError) throw new CliError(error.message)
    throw error
  }
}

/** The running run `runId`; fails naming the address when the server is unreachable or has no such run. */
export async function connectToRun(runId: string): Promise<RunClient> {
  assertValidRunId(runId)
  const target = await resolveTarget()
  const address = target.connectionOptions.address ?? '(default address)'
  const { connection, close } = await connectClient(target.connectionOptions as ConnectionOptions, target.remote)
  const client = new Client({ connection, namespace: target.namespace })
  const handle = client.workflow.getHandle<typeof seedRun>(runId)
  try {
    const description = await handle.describe()
    if (description.type !== 'seedRun')
      throw new CliError(`${runId} on ${address} is a ${description.type} workflow, not a seedflow run`)
  } catch (error) {
    await close()
    if (error instanceof WorkflowNotFoundError)
      throw new CliError(`no run ${runId} on ${address} (namespace ${target.namespace})`)
    throw error
  }
  return { client, address, handle, close }
}

async function resolveTarget() {
  const probe = temporalTarget('')
  if (probe.remote) return probe
  const server = await findRunningTemporal(localPaths().stateDir)
  if (!server) {
    const port = process.env.SEEDFLOW_TEMPORAL_PORT || LOCAL_PORTS.temporal
    throw new CliError(`no local Temporal dev server is running (expected at 127.0.0.1:${port}): ${UP_HINT}`)
  }
  return temporalTarget(server.address)
}

/** An update or signal refused by the workflow: its message (the field paths of a bad override). */
export function refusal(error: unknown): string {
  const parts: string[] = []
  for (let e: unknown = error; e instanceof Error && parts.length < 4; e = e.cause)
    if (e.message && !parts.includes(e.message)) parts.push(e.message)
  return parts.join(': ')
}
