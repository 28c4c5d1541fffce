// `seedflow serve <checkpoint>`: the plain policy behind an OpenAI-compatible HTTP server until SIGTERM or
// Ctrl-C, then a graceful shutdown: new requests get 503, in-flight ones have the grace period to finish, the
// rest fail with an error, and the process exits 0. Started by npm (`npx seedflow serve`), it also stops when
// its parent exits: npm forwards SIGTERM only to its `sh -c`, which dies without passing it on.
import { basename } from 'node:path'
import { createLocalEngine } from '../engine/index.ts'
import {
  type AccessLogEntry,
  DEFAULT_BATCH_ROWS,
  DEFAULT_CONTEXT,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_MAX_QUEUE,
  serveCheckpoint,
} from '../serve/index.ts'
import { type CheckpointSource, describeSource, resolveCheckpoint } from './checkpoint-source.ts'
import { type CommandIo, lazyStore, STDIO } from './generate-command.ts'
import { RunInputError } from './run-checkpoint.ts'

export interface ServeCommandOptions {
  run?: string
  iteration?: string
  host: string
  port: number
  servedModelName?: string
  batchRows: number
  context?: number
  maxQueue: number
  maxBodyBytes: number
  gracePeriod: number
  threads?: number
  /** The environment variable holding the API key clients must send (never a flag: argv is visible to ps). */
  apiKeyEnv?: string
  /** Comma-separated origins browsers may call from, or `*`; unset: no CORS. */
  cors?: string
  /** One stderr line per request (default true). */
  accessLog: boolean
}

export const SERVE_DEFAULTS = {
  host: '127.0.0.1',
  port: 8000,
  batchRows: DEFAULT_BATCH_ROWS,
  maxQueue: DEFAULT_MAX_QUEUE,
  maxBodyBytes: DEFAULT_MAX_BODY_BYTES,
  gracePeriod: 30,
  accessLog: true,
} as const

/** How often a server started by npm checks that its parent is still there. */
export const PARENT_POLL_MS = 500

/** One access-log line: method, path, status, tokens, time; never the key, the query string or the body. */
export function accessLogLine(e: AccessLogEntry): string {
  return (
    `seedflow: ${e.method} ${e.path} ${e.status} prompt_tokens=${e.promptTokens} ` +
    `completion_tokens=${e.completionTokens} ${e.ms.toFixed(1)}ms\n`
  )
}

/** `--cors a,b` as a list of origins; an empty entry or an origin with a path is refused. */
export function corsOrigins(flag: string): string[] {
  const origins = flag.split(',').map((o) => o.trim())
  for (const origin of origins)
    if (origin !== '*' && !/^https?:\/\/[^/\s]+$/.test(origin))
      throw new RunInputError(
        `--cors ${flag}: ${JSON.stringify(origin)} is not an origin (scheme://host[:port], or * for any)`,
      )
  return origins
}

/** Resolves with the signal that stops the server, or 'parent exited' for a server that npm started. */
function stopRequested(): Promise<NodeJS.Signals | 'parent exited'> {
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined
    const stop = (why: NodeJS.Signals | 'parent exited') => {
      clearInterval(timer)
      resolve(why)
    }
    for (const s of ['SIGINT', 'SIGTERM'] as const) process.once(s, () => stop(s))
    if (process.env.npm_lifecycle_event === undefined) return
    const parent = process.ppid
    timer = setInterval(() => {
      if (process.ppid !== parent) stop('parent exited')
    }, PARENT_POLL_MS)
    timer.unref()
  })
}

/** The model name clients use: the flag, else the folder's name, else the run and iteration, else the key. */
function modelName(source: CheckpointSource, flag: string | undefined): string {
  if (flag) return flag
  if (source.kind === 'folder') return basename(source.location)
  if (source.run && source.iteration) return `${source.run}/${source.iteration}`
  return source.location.replace(/\/$/, '')
}

export async function serveCommand(
  checkpoint: string | undefined,
  options: ServeCommandOptions,
  io: CommandIo = STDIO,
): Promise<void> {
  const apiKey = options.apiKeyEnv === undefined ? undefined : process.env[options.apiKeyEnv]
  if (options.apiKeyEnv !== undefined && !apiKey)
    throw new RunInputError(`--api-key-env ${options.apiKeyEnv}: that environment variable is not set or empty`)
  const origins = options.cors === undefined ? undefined : corsOrigins(options.cors)
  const resolved = await resolveCheckpoint(checkpoint, options, lazyStore())
  const ckpt = await resolved.load()
  const context = options.context ?? Math.min(DEFAULT_CONTEXT, ckpt.config.maxPositions)
  if (context > ckpt.config.maxPositions)
    throw new RunInputError(`--context ${context} exceeds the model's ${ckpt.config.maxPositions} positions`)
  const engine = createLocalEngine(options.threads ? { threads: options.threads } : {})
  const name = modelName(resolved.source, options.servedModelName)
  const serving = await serveCheckpoint(engine, ckpt, {
    name,
    host: options.host,
    port: options.port,
    rows: options.batchRows,
    context,
    maxQueue: options.maxQueue,
    maxBodyBytes: options.maxBodyBytes,
    ...(apiKey ? { apiKey } : {}),
    ...(origins ? { corsOrigins: origins } : {}),
    ...(options.accessLog ? { accessLog: (entry: AccessLogEntry) => io.err(accessLogLine(entry)) } : {}),
  }).catch(async (error: unknown) => {
    await engine.close()
    throw error
  })
  io.out(
    `seedflow: serving ${name} (${describeSource(resolved.source)}) at ${serving.url}/v1 ` +
      `(GET /v1/models, POST /v1/chat/completions, /v1/completions; GET /metrics); ` +
      `${options.batchRows} rows of ${context} tokens, queue ${options.maxQueue}` +
      `${origins ? `; CORS for ${origins.join(', ')}` : ''}; SIGTERM or Ctrl-C stops it\n`,
  )
  const signal = await stopRequested()
  io.err(
    `seedflow: ${signal}: no new requests; in-flight ones have ${options.gracePeriod} s to finish (--grace-period)\n`,
  )
  await serving.close(options.gracePeriod * 1000)
  await engine.close()
  io.err('seedflow: stopped\n')
}
