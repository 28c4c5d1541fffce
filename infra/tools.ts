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

/** Runs the idempotent install script when a binary is missing (it prints its own progress). */
export function ensureTools(env: NodeJS.ProcessEnv = process.env): ToolPaths {
  const paths = toolPaths(env)
  if (existsSync(paths.temporal) && existsSync(paths.versitygw)) return paths
  const script = join(PROJECT_ROOT, 'infra', 'install-tools.sh')
  const result = spawnSync('bash', [script], { stdio: ['ignore', 2, 2], env })
  if (result.status !== 0)
    throw new Error(`installing the server binaries failed (bash ${script}, exit ${result.status})`)
  for (const path of Object.values(paths)) {
    if (!existsSync(path)) throw new Error(`${path} is missing after bash ${script}`)
  }
  return paths
}
