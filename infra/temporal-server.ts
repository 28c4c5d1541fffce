import { Connection } from '@temporalio/client'
import { freePort } from './ports.ts'
import {
  isRunning,
  logFileOf,
  pidFileOf,
  readPidFile,
  startProcess,
  stopRecorded,
  waitUntilReady,
} from './processes.ts'

/** The custom search attributes of docs/design.md §10.4, registered at dev-server start. */
export const SEARCH_ATTRIBUTES = {
  SeedIteration: 'Int',
  SeedPhase: 'Keyword',
  SeedEnv: 'Keyword',
  SeedAlgorithm: 'Keyword',
  SeedSuccessRate: 'Double',
} as const

export interface TemporalServerOptions {
  binary: string
  stateDir: string
  /** SQLite state file; omitted means in-memory state. */
  dbFile?: string
  /** Frontend gRPC port; a free one when omitted. */
  port?: number
  /** Web UI port, or `false` for headless. */
  uiPort?: number | false
  metricsPort?: number
  /** The HTTP API's port; a free one when omitted (the `temporal` CLI would pick any, unasked). */
  httpPort?: number
  detached: boolean
  readyTimeoutMs?: number
}

export interface TemporalEndpoints {
  address: string
  namespace: string
  uiUrl?: string
  metricsUrl: string
  /** The HTTP API (absent in the PID files of servers started before it was recorded). */
  httpUrl?: string
}

export interface TemporalServer extends TemporalEndpoints {
  pid: number
  logFile: string
  stop(): Promise<void>
}

export const TEMPORAL_NAME = 'temporal'

/**
 * Starts the dev server. Ports it was not given are free ones, picked a moment before the server binds them: on a
 * shared machine another process (an outgoing connection's ephemeral port) can take one in between, so a start that
 * fails with "address already in use" on picked ports is tried again with new ones (3 tries).
 */
export async function startTemporalServer(options: TemporalServerOptions): Promise<TemporalServer> {
  const picked = options.port === undefined || options.metricsPort === undefined || options.httpPort === undefined
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options)
    } catch (error) {
      if (!picked || attempt >= 3 || !/address already in use/.test(String(error))) throw error
      process.stderr.write(`seedflow: a port picked for the Temporal dev server was taken meanwhile; trying new ones\n`)
    }
  }
}

async function startOnce(options: TemporalServerOptions): Promise<TemporalServer> {
  const port = options.port ?? (await freePort())
  const metricsPort = options.metricsPort ?? (await freePort())
  const httpPort = options.httpPort ?? (await freePort())
  const args = devServerArgs({ ...options, port, metricsPort, httpPort })

  const address = `127.0.0.1:${port}`
  const uiUrl = options.uiPort === false ? undefined : `http://127.0.0.1:${options.uiPort ?? port + 1000}`
  const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`
  const httpUrl = `http://127.0.0.1:${httpPort}`
  const info: TemporalEndpoints = { address, namespace: 'default', metricsUrl, httpUrl, ...(uiUrl ? { uiUrl } : {}) }
  const proc = await startProcess({
    name: TEMPORAL_NAME,
    command: options.binary,
    args,
    stateDir: options.stateDir,
    detached: options.detached,
    info: { ...info },
  })
  try {
    await waitUntilReady(
      proc,
      `Temporal dev server at ${address}`,
      () => temporalReady(address),
      options.readyTimeoutMs ?? 60_000,
    )
  } catch (error) {
    await proc.stop()
    throw error
  }
  return { ...info, pid: proc.record.pid, logFile: proc.logFile, stop: proc.stop }
}

/** The `temporal server start-dev` arguments: every port given (none left for it to pick), all on 127.0.0.1. */
export function devServerArgs(
  options: Pick<TemporalServerOptions, 'dbFile' | 'uiPort'> & { port: number; metricsPort: number; httpPort: number },
): string[] {
  const { port, metricsPort, httpPort } = options
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--http-port', String(httpPort)]
  args.push('--metrics-port', String(metricsPort), '--log-level', 'warn')
  if (options.uiPort === false) args.push('--headless')
  else args.push('--ui-ip', '127.0.0.1', '--ui-port', String(options.uiPort ?? port + 1000))
  if (options.dbFile) args.push('--db-filename', options.dbFile)
  for (const [name, type] of Object.entries(SEARCH_ATTRIBUTES)) args.push('--search-attribute', `${name}=${type}`)
  return args
}

/** True once the frontend answers and the default namespace exists. */
export async function temporalReady(address: string): Promise<boolean> {
  const connection = await Connection.connect({ address, connectTimeout: 1000 })
  try {
    await connection.workflowService.describeNamespace({ namespace: 'default' })
    return true
  } finally {
    await connection.close()
  }
}

/** A server started earlier (detached) under `stateDir` that still runs and answers, if any. */
export async function findRunningTemporal(stateDir: string): Promise<TemporalServer | undefined> {
  const pidFile = pidFileOf(stateDir, TEMPORAL_NAME)
  const record = await readPidFile(pidFile)
  if (!record || !(await isRunning(record))) return undefined
  const info = record.info as unknown as TemporalEndpoints
  if (!(await temporalReady(info.address).catch(() => false))) return undefined
  return {
    ...info,
    pid: record.pid,
    logFile: logFileOf(stateDir, TEMPORAL_NAME),
    stop: () => stopRecorded(record, pidFile),
  }
}
