import { downLocal, localPaths, upTemporal } from '../infra/local-stack.ts'

export async function upCommand(): Promise<void> {
  const temporal = await upTemporal()
  const how = temporal.reused ? 'already running' : 'started'
  process.stdout.write(
    `Temporal dev server ${how}: ${temporal.address} (pid ${temporal.pid})\n` +
      `  Web UI   ${temporal.uiUrl ?? '(headless)'}\n  HTTP API ${temporal.httpUrl ?? '(not recorded)'}\n` +
      `  metrics  ${temporal.metricsUrl}\n` +
      `  state    ${localPaths().stateDir}\n  log      ${temporal.logFile}\n`,
  )
}

export async function downCommand(): Promise<void> {
  const stopped = await downLocal()
  process.stdout.write(stopped.length ? `stopped ${stopped.join(', ')}\n` : 'no local seedflow servers were running\n')
}
