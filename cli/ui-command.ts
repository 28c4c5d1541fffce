// `seedflow ui`: the report pages of every run in the store (the local folder by default, S3 through
// SEEDFLOW_S3_* as the other commands) on a local web server, with Temporal's state of each run and links to its
// Web UI when a server answers. Runs until Ctrl-C.
import { localPaths } from '../infra/local-stack.ts'
import { startUiServer } from '../report/ui-server.ts'
import { storeFromEnv } from '../store/from-env.ts'
import { temporalView } from './report-temporal.ts'
import { CliError } from './run-client.ts'

export interface UiCommandOptions {
  host: string
  port: number
  trajectories: number
  refresh: number
}

export async function uiCommand(options: UiCommandOptions): Promise<void> {
  const store = storeFromEnv(localPaths().artifacts)
  const ui = await startUiServer({
    store,
    host: options.host,
    port: options.port,
    trajectories: options.trajectories,
    refreshSeconds: options.refresh,
    temporal: temporalView,
    log: (line) => process.stderr.write(`${line}\n`),
  }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'EADDRINUSE')
      throw new CliError(
        `port ${options.port} is in use on ${options.host}: choose another with --port (0: any free one)`,
      )
    throw error
  })
  process.stdout.write(`seedflow ui: ${ui.url} (runs in ${store.location}); Ctrl-C stops it\n`)
  await new Promise<void>((resolve) => {
    const stop = () => resolve()
    process.once('SIGINT', stop)
    process.once('SIGTERM', stop)
  })
  await ui.close()
}
