// llama.cpp's OpenAI-compatible server (llama-cpp-python[server]), built once by infra/install-llama-server.sh
// into a virtual environment in the cache outside the clone, keyed by version. The Stage 1 integration test serves
// a GGUF with it on 127.0.0.1 as an external annotator; it is started, logged and stopped by PID like the other
// servers (infra/processes.ts).
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { cacheDir } from './models.ts'
import { freePort } from './ports.ts'
import { startProcess, waitUntilReady } from './processes.ts'
import { installIfMissing } from './tools.ts'

/** The pinned llama-cpp-python release (the script's `version`). */
export const LLAMA_CPP_PYTHON_VERSION = '0.3.36'

export const LLAMA_SERVER_NAME = 'llama-server'

/** The venv's python, where the install script puts it. */
export function llamaServerPython(env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheDir(env), `llama-cpp-python-${LLAMA_CPP_PYTHON_VERSION}`, 'bin', 'python')
}

function installed(python: string): boolean {
  const stamp = join(python, '..', '..', '.seedflow-version')
  return (
    existsSync(python) &&
    existsSync(stamp) &&
    readFileSync(stamp, 'utf8').trim() === `llama-cpp-python[server]==${LLAMA_CPP_PYTHON_VERSION}`
  )
}

/**
 * Runs the idempotent build script when the server is missing (it prints its own progress; a cold build compiles
 * llama.cpp, minutes on 2 cores) and returns the venv's python.
 */
export function ensureLlamaServer(env: NodeJS.ProcessEnv = process.env): string {
  const python = llamaServerPython(env)
  installIfMissing(
    'install-llama-server.sh',
    "building llama.cpp's server",
    () => (installed(python) ? undefined : python),
    env,
  )
  return python
}

export interface LlamaServerOptions {
  /** The GGUF to serve. */
  model: string
  /** The name clients send as `model` (llama-cpp-python answers to this alias). */
  alias?: string
  stateDir: string
  port?: number
  /** Context tokens per request. */
  nCtx?: number
  /** Compute threads (default 1: on a busy machine llama.cpp's spinning OpenMP threads slow each other down). */
  threads?: number
  /** When set, the server refuses requests without `Authorization: Bearer <apiKey>`. */
  apiKey?: string
  python?: string
  readyTimeoutMs?: number
}

export interface LlamaServer {
  /** The API root clients use, `http://127.0.0.1:<port>/v1`. */
  baseUrl: string
  model: string
  pid: number
  logFile: string
  stop(): Promise<void>
}

/**
 * Starts `python -m llama_cpp.server` on 127.0.0.1 (a free port unless given), owned by this process, and waits
 * until GET /v1/models answers. The key, when given, goes through the environment, not the command line (which
 * the PID file and `ps` show).
 */
export async function startLlamaServer(options: LlamaServerOptions): Promise<LlamaServer> {
  const python = options.python ?? ensureLlamaServer()
  const port = options.port ?? (await freePort())
  const alias = options.alias ?? 'annotator'
  const baseUrl = `http://127.0.0.1:${port}/v1`
  const args = [
    '-m',
    'llama_cpp.server',
    '--model',
    options.model,
    '--model_alias',
    alias,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '--n_ctx',
    String(options.nCtx ?? 2048),
    '--n_threads',
    String(options.threads ?? 1),
    '--n_gpu_layers',
    '0',
    '--verbose',
    'False',
  ]
  const env: NodeJS.ProcessEnv = { ...process.env }
  // llama-cpp-python's settings are pydantic settings: API_KEY in the environment is --api_key
  if (options.apiKey) env.API_KEY = options.apiKey
  else delete env.API_KEY
  const proc = await startProcess({
    name: LLAMA_SERVER_NAME,
    command: python,
    args,
    env,
    stateDir: options.stateDir,
    detached: false,
    info: { baseUrl, model: options.model },
  })
  const headers: Record<string, string> = options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}
  try {
    await waitUntilReady(
      proc,
      `llama.cpp server at ${baseUrl}`,
      async () => (await fetch(`${baseUrl}/models`, { headers })).ok,
      options.readyTimeoutMs ?? 120_000,
    )
  } catch (error) {
    await proc.stop()
    throw error
  }
  return { baseUrl, model: alias, pid: proc.record.pid, logFile: proc.logFile, stop: proc.stop }
}
