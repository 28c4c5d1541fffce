// A run's environment, as its configuration names it: one of the five built-in ones by name (their step caps and
// stop strings mirrored here, kept equal to `envs/` by a test), or a server that speaks the environment protocol
// (docs/environment-protocol.md) by URL. Pure, like the rest of the configuration.
import { z } from 'zod'
import { SPLITS } from '../envs/types.ts'
import {
  boundedString,
  ENV_NAME_PATTERN,
  int,
  MAX_NAME_LENGTH,
  MAX_URL_LENGTH,
  positiveInt,
  tooLong,
} from './config-fields.ts'

/** The environments of `envs/ENVS` (a test checks the two agree). */
export const RUN_ENV_NAMES = ['sokoban', 'ezpoints', 'household', 'shop', 'searchqa'] as const
export type RunEnvName = (typeof RUN_ENV_NAMES)[number]

/** Each environment's own step cap (`env.maxSteps`); a run may use fewer, never more. */
export const ENV_STEP_CAPS: Record<RunEnvName, number> = {
  sokoban: 15,
  ezpoints: 8,
  household: 30,
  shop: 15,
  searchqa: 4,
}

/** Where a response ends: the closing tag of the environment's answer format (generation stops there). */
export const ENV_STOP_STRINGS: Record<RunEnvName, readonly string[]> = {
  sokoban: ['</action>'],
  ezpoints: ['}'],
  household: ['</action>'],
  shop: ['</action>'],
  searchqa: ['</search>', '</answer>'],
}

/** The response format of the built-in environments that think, then act (envs/core.ts formatThinkAction). */
export const THINK_ACTION_FORMAT = '<think>{thought}</think><action>{action}</action>'

/** An environment variable's name, for a key read on the worker (never stored). */
export const envVarName = () =>
  z
    .string()
    .max(MAX_NAME_LENGTH, tooLong(MAX_NAME_LENGTH))
    .regex(ENV_NAME_PATTERN, 'an environment variable name: letters, digits and _, not starting with a digit')

/** The server's tasks of one split: seed s is the server's task `first + s mod count` (sent as `seed` and `data_idx`). */
const SplitRange = z.strictObject({ first: int(0), count: positiveInt() })

/** An environment served over HTTP (docs/environment-protocol.md), named by its URL. */
export const HttpEnvSchema = z.strictObject({
  kind: z.literal('http'),
  /** The server's root, e.g. `http://127.0.0.1:8765`; no credentials in it (a key comes from `apiKeyEnv`). */
  baseUrl: z.url({ protocol: /^https?$/ }).max(MAX_URL_LENGTH, tooLong(MAX_URL_LENGTH)),
  /** What reports and metrics call the environment; default `http:<host:port>`. */
  name: boundedString(MAX_NAME_LENGTH).optional(),
  /** The environment variable holding the server's API key (sent as a bearer token), read on the worker. */
  apiKeyEnv: envVarName().optional(),
  /** The episode's step cap (the server may end an episode sooner). */
  maxSteps: positiveInt(),
  /** Where a response ends (generation stops after the first of these); empty: at the response budget. */
  stop: z.array(boundedString(MAX_NAME_LENGTH)).max(8),
  /**
   * How a demonstration's action is written as the model's response (warm-start): `{action}` and `{thought}` (the
   * expert's sub-goal, '' when it gives none) are replaced.
   */
  responseFormat: boundedString(1024)
    .refine((f) => f.includes('{action}'), 'must contain {action}')
    .default(THINK_ACTION_FORMAT),
  /**
   * The step prompt, for a server without seedflow's `/prompt` route: `instruction`, the last `historyLength`
   * (observation, action) pairs, the current observation and the admissible actions where the server lists
   * them. A skill goes after the instruction's line with `Your task is:` (or `Your goal is`, …), else before
   * `Now it's your turn`, else at the end (seed/skill-context.ts).
   */
  prompt: z
    .strictObject({
      instruction: boundedString(16_384),
      historyLength: int(0).default(2),
    })
    .optional(),
  /** Each split's task range on the server; absent: seed s is task s. */
  splits: z.partialRecord(z.enum(SPLITS), SplitRange).optional(),
  /** One request, its reply's last byte included. An episode whose request times out ends as failed. */
  timeoutSeconds: z.number().positive().finite().default(30),
  /** Tries again of an idempotent request that failed (a step is never sent twice). */
  retries: int(0).max(10).default(3),
  /** Requests in flight at once, per worker process. */
  concurrency: positiveInt().default(32),
})

export const RunEnvSchema = z.union([z.enum(RUN_ENV_NAMES), HttpEnvSchema])

export type HttpEnvConfig = z.infer<typeof HttpEnvSchema>
/** A run's `env`: a built-in environment's name or a server's. */
export type RunEnvSpec = z.infer<typeof RunEnvSchema>

/** The run's step cap of its environment. */
export function envStepCap(env: RunEnvSpec): number {
  return typeof env === 'string' ? ENV_STEP_CAPS[env] : env.maxSteps
}

/** Where the environment's responses end. */
export function envStopStrings(env: RunEnvSpec): readonly string[] {
  return typeof env === 'string' ? ENV_STOP_STRINGS[env] : env.stop
}

/** The environment's name in reports, metrics and search attributes. */
export function envLabel(env: RunEnvSpec): string {
  return envLabelOf(env)
}

/** The same for a config as stored (run.json's, not parsed again): '' when it names none. */
export function envLabelOf(raw: unknown): string {
  if (typeof raw === 'string') return raw
  const http = raw as Partial<HttpEnvConfig> | null
  if (typeof http?.baseUrl !== 'string') return ''
  return typeof http.name === 'string'
    ? http.name
    : `http:${URL.canParse(http.baseUrl) ? new URL(http.baseUrl).host : http.baseUrl}`
}
