// What the report adds from Temporal when it can reach it: each run's workflow status (RUNNING, FAILED, …) and
// the link to its page in Temporal's Web UI. Best effort and bounded in time: the report is built from the store
// and must not hang or fail because no Temporal server answers.
import { Client, Connection } from '@temporalio/client'
import { localPaths } from '../infra/local-stack.ts'
import { findRunningTemporal } from '../infra/temporal-server.ts'
import { temporalTarget } from '../workers/connection.ts'

export interface TemporalView {
  /** Run id → workflow status name, for the runs Temporal knows. */
  status: Map<string, string>
  /** The Web UI page of a run, when a UI address is known. */
  link?: (runId: string) => string
  /** Why there is no status (no server reachable), for the caller to print. */
  note?: string
}

const TIMEOUT_MS = 4000

function withTimeout<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${TIMEOUT_MS / 1000} s`)), TIMEOUT_MS)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/**
 * The local dev server's (`seedflow up`) or the cluster's (TEMPORAL_ADDRESS & co.) view of `runIds`. The UI link
 * is SEEDFLOW_TEMPORAL_UI_URL when set, else the local dev server's UI.
 */
export async function temporalView(runIds: readonly string[]): Promise<TemporalView> {
  const status = new Map<string, string>()
  let target = temporalTarget('')
  let uiUrl = process.env.SEEDFLOW_TEMPORAL_UI_URL
  if (!target.remote) {
    const local = await findRunningTemporal(localPaths().stateDir).catch(() => undefined)
    if (!local) return { status, note: 'no Temporal server reachable: the state comes from the store alone' }
    target = temporalTarget(local.address)
    uiUrl ??= local.uiUrl
  }
  const ui = uiUrl?.replace(/\/$/, '')
  const link = ui
    ? (runId: string) =>
        `${ui}/namespaces/${encodeURIComponent(target.namespace)}/workflows/${encodeURIComponent(runId)}`
    : undefined
  let connection: Connection | undefined
  try {
    connection = await withTimeout(Connection.connect(target.connectionOptions as never), 'connecting to Temporal')
    const client = new Client({ connection, namespace: target.namespace })
    for (const runId of runIds) {
      const d = await withTimeout(client.workflow.getHandle(runId).describe(), `describing ${runId}`).catch(
        () => undefined,
      )
      if (d) status.set(runId, d.status.name)
    }
    return { status, ...(link ? { link } : {}) }
  } catch (error) {
    return {
      status,
      note: `Temporal not reachable (${(error as Error).message}): the state comes from the store alone`,
    }
  } finally {
    await connection?.close().catch(() => undefined)
  }
}
