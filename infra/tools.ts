import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The repository root (this file lives in `<root>/infra`). */
export const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')

export interface ToolPaths {
  temporal: string
  versitygw: string
}

/** Binaries from the environment (SEEDFLOW_TEMPORAL_BIN, SEEDFLOW_S3_SERVER_BIN) or the tools folder. */
export function toolPaths(env: NodeJS.ProcessEnv = process.env): ToolPaths {
  const bin = join(env.SEEDFLOW_TOOLS_DIR ?? join(PROJECT_ROOT, '.tools'), 'bin')
  return {
    temporal: env.SEEDFLOW_TEMPORAL_BIN ?? join(bin, 'temporal'),
    versitygw: env.SEEDFLOW_S3_SERVER_BIN ?? join(bin, 'versitygw'),
  }
}

/**
 * The one way every `ensure…` installs: when `missing()` names something (the first missing file), runs the
 * idempotent `infra/<script>` (it prints its own progress on stderr; its stdout goes there too, or nowhere), fails
 * saying `doing` failed when it does, and checks with `missing()` again that it made everything.
 */
export function installIfMissing(
  script: string,
  doing: string,
  missing: () => string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  stdout: 'ignore' | 2 = 'ignore',
): void {
  if (missing() === undefined) return
  const path = join(PROJECT_ROOT, 'infra', script)
  const result = spawnSync('bash', [path], { stdio: ['ignore', stdout, 2], env })
  if (result.status !== 0) throw new Error(`${doing} failed (bash ${path}, exit ${result.status})`)
  const still = missing()
  if (still !== undefined) throw new Error(`${still} is missing after bash ${path}`)
}

/**
 * Runs an idempotent install script that prints what it ensured (a path) as its last line on stdout, and returns
 * that line; `what` names it in the error when the script fails.
 */
export function ensuredByScript(script: string, what: string, env: NodeJS.ProcessEnv = process.env): string {
  const path = join(PROJECT_ROOT, 'infra', script)
  const result = spawnSync('bash', [path], { stdio: ['ignore', 'pipe', 2], env, encoding: 'utf8' })
  const line = result.stdout.trim().split('\n').pop()
  if (result.status !== 0 || !line) throw new Error(`no ${what} (bash ${path}, exit ${result.status})`)
  return line
}

/** Runs the idempotent install script when a binary is missing (it prints its own progress). */
export function ensureTools(env: NodeJS.ProcessEnv = process.env): ToolPaths {
  const paths = toolPaths(env)
  const missing = () => Object.values(paths).find((path) => !existsSync(path))
  installIfMissing('install-tools.sh', 'installing the server binaries', missing, env, 2)
  return paths
}
