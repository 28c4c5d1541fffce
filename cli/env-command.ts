import { InvalidArgumentError } from 'commander'
import { DEFAULT_IDLE_TTL_MS, DEFAULT_MAX_EPISODES, formatDuration, serveEnv } from '../envs/http/index.ts'
import { ENV_NAMES } from '../envs/index.ts'
import { SEEDFLOW_VERSION } from '../records/seedflow-version.ts'

export function parsePort(value: string): number {
  const port = Number(value)
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidArgumentError(`not a port number: ${value}`)
  return port
}

/** `seedflow env serve <name>`: one of our environments over the AgentGym-style HTTP protocol, until Ctrl-C. */
export async function envServeCommand(
  name: string,
  options: { port: number; host: string; maxEpisodes?: number; idleTtl?: number; bareActions?: boolean },
): Promise<void> {
  if (!(ENV_NAMES as string[]).includes(name)) {
    throw new Error(`unknown environment ${JSON.stringify(name)}; one of: ${ENV_NAMES.join(', ')}`)
  }
  const maxEpisodes = options.maxEpisodes ?? DEFAULT_MAX_EPISODES
  const idleTtlMs = options.idleTtl === undefined ? DEFAULT_IDLE_TTL_MS : options.idleTtl * 1000
  const served = await serveEnv(name, {
    port: options.port,
    host: options.host,
    maxEpisodes,
    idleTtlMs,
    version: SEEDFLOW_VERSION,
    ...(options.bareActions ? { bareActions: true } : {}),
  })
  process.stdout.write(
    `seedflow: serving ${name} at ${served.url} (POST /create, /reset, /step, /close, /oracle; GET /info, /observation, /prompt, /expert_action, …); ` +
      `at most ${maxEpisodes} episodes open, idle ones evicted after ${formatDuration(idleTtlMs)}; Ctrl-C stops it\n`,
  )
  await new Promise<void>((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, resolve)
  })
  await served.close()
}
