// The client side of the operator commands (status, retry, pause, resume, abort): a connection to the run's
// Temporal server (TEMPORAL_ADDRESS & co., else the local dev server of `seedflow up`) and the run's workflow,
// with clear errors for an unreachable server and an unknown run. Starts nothing.
import { Client, Connection, type WorkflowHandle, WorkflowNotFoundError } from '@temporalio/client'
import { LOCAL_PORTS, localPaths } from '../infra/local-stack.ts'
import { findRunningTemporal } from '../infra/temporal-server.ts'
import { assertValidRunId } from '../store/keys.ts'
import { temporalTarget } from '../workers/connection.ts'
import type { seedRun } from '../workflows/seed-run.ts'

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

/** The running run `runId`; fails naming the address when the server is unreachable or has no such run. */
export async function connectToRun(runId: string): Promise<RunClient> {
  assertValidRunId(runId)
  const target = await resolveTarget()
  const address = target.connectionOptions.address ?? '(default address)'
  let connection: Connection
  try {
    connection = await Connection.connect({ ...target.connectionOptions, connectTimeout: '5 seconds' } as never)
  } catch (error) {
    throw new CliError(`cannot reach Temporal at ${address} (${(error as Error).message}): ${UP_HINT}`)
  }
  const client = new Client({ connection, namespace: target.namespace })
  const handle = client.workflow.getHandle<typeof seedRun>(runId)
  try {
    const description = await handle.describe()
    if (description.type !== 'seedRun')
      throw new CliError(`${runId} on ${address} is a ${description.type} workflow, not a seedflow run`)
  } catch (error) {
    await connection.close()
    if (error instanceof WorkflowNotFoundError)
      throw new CliError(`no run ${runId} on ${address} (namespace ${target.namespace})`)
    throw error
  }
  return { client, address, handle, close: () => connection.close() }
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
