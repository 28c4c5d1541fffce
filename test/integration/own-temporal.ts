// A Temporal dev server of a test's own, for tests that kill it (never the shared one test/run.ts starts): SQLite
// state in the test's state folder, so that a server started again on the same port finds the runs it had.
import { join } from 'node:path'
import { freePort } from '../../infra/ports.ts'
import { startTemporalServer, type TemporalServer } from '../../infra/temporal-server.ts'
import { toolPaths } from '../../infra/tools.ts'
import { testServers } from './servers.ts'

export interface OwnTemporal {
  address: string
  server: TemporalServer
  /** SIGKILL, as a crash would; resolves once the process is gone. */
  kill(): Promise<void>
  /** The same server again (port and state) after a kill. */
  restart(): Promise<void>
  stop(): Promise<void>
}

export async function startOwnTemporal(name: string): Promise<OwnTemporal> {
  const stateDir = join(testServers().stateDir, name)
  const port = await freePort()
  const start = () =>
    startTemporalServer({
      binary: toolPaths().temporal,
      stateDir,
      dbFile: join(stateDir, 'temporal.db'),
      port,
      uiPort: false,
      detached: false,
    })
  let server = await start()
  return {
    address: server.address,
    get server() {
      return server
    },
    async kill() {
      process.kill(server.pid, 'SIGKILL')
      while (alive(server.pid)) await new Promise((resolve) => setTimeout(resolve, 20))
    },
    async restart() {
      server = await start()
    },
    stop: () => server.stop(),
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}
