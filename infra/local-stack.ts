// The embedded default's servers: a Temporal dev server with SQLite state under `.seedflow/local`, started
// detached so it outlives the command (the Web UI stays browsable) and reused until `seedflow down`.
import { createServer } from 'node:net'
import { join, resolve } from 'node:path'
import { reapStale, stopByPidFile } from './processes.ts'
import { findRunningTemporal, startTemporalServer, TEMPORAL_NAME, type TemporalServer } from './temporal-server.ts'
import { ensureTools } from './tools.ts'

export interface LocalStackPaths {
  home: string
  stateDir: string
  artifacts: string
}

/** `$SEEDFLOW_HOME`, or `.seedflow` in the current folder. */
export function localPaths(env: NodeJS.ProcessEnv = process.env): LocalStackPaths {
  const home = resolve(env.SEEDFLOW_HOME ?? join(process.cwd(), '.seedflow'))
  const stateDir = join(home, 'local')
  return { home, stateDir, artifacts: join(stateDir, 'artifacts') }
}

export const LOCAL_PORTS = { temporal: 7233, ui: 8233, metrics: 9233 } as const
/** The HTTP API's port is the frontend's plus this, unless SEEDFLOW_TEMPORAL_HTTP_PORT says otherwise. */
export const HTTP_PORT_OFFSET = 10

/** The local dev server's ports from SEEDFLOW_TEMPORAL_*: frontend, HTTP API, Web UI, metrics. */
export function localTemporalPorts(env: NodeJS.ProcessEnv = process.env) {
  const port = portFromEnv(env, 'SEEDFLOW_TEMPORAL_PORT', LOCAL_PORTS.temporal)
  return {
    port,
    httpPort: portFromEnv(env, 'SEEDFLOW_TEMPORAL_HTTP_PORT', Math.min(port + HTTP_PORT_OFFSET, 65535)),
    uiPort: portFromEnv(env, 'SEEDFLOW_TEMPORAL_UI_PORT', LOCAL_PORTS.ui),
    metricsPort: portFromEnv(env, 'SEEDFLOW_TEMPORAL_METRICS_PORT', LOCAL_PORTS.metrics),
  }
}

function portFromEnv(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const port = Number(raw)
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new Error(`${name} must be a port number, got ${JSON.stringify(raw)}`)
  return port
}

async function assertPortFree(port: number, what: string, envName: string): Promise<void> {
  await new Promise<void>((ok, fail) => {
    const server = createServer()
    server.once('error', (error: NodeJS.ErrnoException) =>
      fail(
        new Error(
          `port ${port} on 127.0.0.1 (${what}) is in use by another program` +
            (error.code === 'EADDRINUSE' ? '' : ` (${error.code})`) +
            `; set ${envName} to another port, or point seedflow at that server with TEMPORAL_ADDRESS`,
        ),
      ),
    )
    server.listen({ host: '127.0.0.1', port }, () => server.close(() => ok()))
  })
}

/** The running local Temporal server, or a new one. `reused` tells which. */
export async function upTemporal(env: NodeJS.ProcessEnv = process.env): Promise<TemporalServer & { reused: boolean }> {
  const { stateDir } = localPaths(env)
  await reapStale(stateDir)
  const { port, httpPort, uiPort, metricsPort } = localTemporalPorts(env)
  const running = await findRunningTemporal(stateDir)
  if (running) {
    // one server per state folder (its SQLite file): a port asked for that is not the running one's is refused,
    // not silently swapped for it (runs would land on another server than the one the caller watches)
    const runningPort = Number(running.address.split(':').at(-1))
    if (env.SEEDFLOW_TEMPORAL_PORT && runningPort !== port)
      throw new Error(
        `SEEDFLOW_TEMPORAL_PORT is ${port}, but the dev server of ${stateDir} already runs at ${running.address} ` +
          `(pid ${running.pid}): unset it to use that server, stop it first (npx seedflow down), or give this one ` +
          'its own state folder (SEEDFLOW_HOME)',
      )
    return { ...running, reused: true }
  }
  await assertPortFree(port, 'Temporal frontend', 'SEEDFLOW_TEMPORAL_PORT')
  await assertPortFree(httpPort, 'Temporal HTTP API', 'SEEDFLOW_TEMPORAL_HTTP_PORT')
  await assertPortFree(uiPort, 'Temporal Web UI', 'SEEDFLOW_TEMPORAL_UI_PORT')
  await assertPortFree(metricsPort, 'Temporal metrics', 'SEEDFLOW_TEMPORAL_METRICS_PORT')
  const tools = ensureTools(env)
  const server = await startTemporalServer({
    binary: tools.temporal,
    stateDir,
    dbFile: join(stateDir, 'temporal.db'),
    port,
    httpPort,
    uiPort,
    metricsPort,
    detached: true,
  })
  return { ...server, reused: false }
}

/** Stops the local servers by their PID files; returns what it stopped. */
export async function downLocal(env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  const { stateDir } = localPaths(env)
  const stopped = await stopByPidFile(stateDir, TEMPORAL_NAME)
  return stopped ? [`${stopped.name} (pid ${stopped.pid})`] : []
}
