// The closed table of environments (docs/design.md §8). Adding one means adding a row here, nothing else.
import { ezpoints } from './ezpoints/index.ts'
import { household } from './household/index.ts'
import { searchqa } from './searchqa/index.ts'
import { shop } from './shop/index.ts'
import { sokoban } from './sokoban/index.ts'
import type { Env } from './types.ts'

export const ENVS = { sokoban, ezpoints, household, shop, searchqa } as const satisfies Record<string, Env>
export type EnvName = keyof typeof ENVS
export const ENV_NAMES = Object.keys(ENVS) as EnvName[]

export class UnknownEnvError extends Error {
  override name = 'UnknownEnvError'
  constructor(readonly envName: string) {
    super(`unknown environment ${JSON.stringify(envName)}; known: ${ENV_NAMES.join(', ')}`)
  }
}

export function getEnv(name: string): Env {
  if (!Object.hasOwn(ENVS, name)) throw new UnknownEnvError(name)
  return ENVS[name as EnvName]
}

export { INVALID_ACTION_PENALTY, trajectoryText } from './core.ts'
export type * from './types.ts'
export { SPLITS } from './types.ts'
