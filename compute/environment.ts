// The run's environment as the phases play it (envs/played.ts): a built-in one by name, or a server named by URL
// (the run config's `env: {kind: "http", …}`, envs/http/remote-env.ts). One per environment per process, so that
// what a server said of itself (GET /info) is asked once. A server's key is read here, on the worker, from the
// variable the config names, and is never stored.
import { HttpEnvClient, RemoteEnv } from '../envs/http/index.ts'
import { getEnv } from '../envs/index.ts'
import { type PlayedEnv, playedEnv } from '../envs/played.ts'
import { ENV_STOP_STRINGS, envLabel, type HttpEnvConfig, type RunEnvSpec } from '../seed/config.ts'
import { CorePhaseError } from './policy.ts'

const opened = new Map<string, PlayedEnv>()

/** The environment a run's config names. */
export function environmentOf(spec: RunEnvSpec): PlayedEnv {
  const key = typeof spec === 'string' ? spec : JSON.stringify(spec)
  let env = opened.get(key)
  if (!env) {
    env = typeof spec === 'string' ? playedEnv(getEnv(spec), ENV_STOP_STRINGS[spec]) : remoteEnvironment(spec)
    opened.set(key, env)
  }
  return env
}

/** The remote environment of an `http` config (also what `planRun` checks the server with). */
export function remoteEnvironment(spec: HttpEnvConfig): RemoteEnv {
  const apiKey = spec.apiKeyEnv === undefined ? undefined : process.env[spec.apiKeyEnv]
  if (spec.apiKeyEnv !== undefined && !apiKey)
    throw new CorePhaseError(
      `the environment server ${spec.baseUrl} needs the key in $${spec.apiKeyEnv}, which is not set on this worker`,
    )
  const client = new HttpEnvClient(spec.baseUrl, {
    timeoutMs: spec.timeoutSeconds * 1000,
    retries: spec.retries,
    concurrency: spec.concurrency,
    ...(apiKey ? { apiKey } : {}),
  })
  return new RemoteEnv(client, {
    name: envLabel(spec),
    maxSteps: spec.maxSteps,
    stop: spec.stop,
    responseFormat: spec.responseFormat,
    ...(spec.prompt ? { prompt: spec.prompt } : {}),
    ...(spec.splits ? { splits: spec.splits } : {}),
  })
}
