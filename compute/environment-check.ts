// A run's remote environment checked at planRun, before anything is recorded: the server answers, an episode
// opens and closes, and it has the optional routes the run's settings need (docs/environment-protocol.md §4).
import { EnvHttpError, type OptionalRoute, type ServerInfo } from '../envs/http/index.ts'
import { ALGORITHMS, needsLibrary, needsStage1 } from '../seed/algorithms.ts'
import type { HttpEnvConfig, RunConfig } from '../seed/config.ts'
import { remoteEnvironment } from './environment.ts'
import { teacherSource } from './plan.ts'
import { CorePhaseError } from './policy.ts'

/** What run.json records of a remote environment: where it is and what it said of itself (never a key). */
export interface EnvironmentIdentity {
  kind: 'http'
  baseUrl: string
  name?: string
  version?: string
  /** The optional routes it has (GET /info). */
  routes: string[]
}

/** What a run asks of its environment's optional routes, and why, for `planRun`'s refusals. */
export function routesNeeded(
  config: Pick<RunConfig, 'warmstart' | 'stage1' | 'stage2' | 'algorithm'>,
): Map<OptionalRoute, string> {
  const needs = new Map<OptionalRoute, string>()
  if (config.warmstart && config.warmstart.demonstrationsFile === undefined) {
    const file = 'warmstart is set, without demonstrationsFile'
    needs.set('expert_action', `the warm-start clones the expert (${file})`)
    needs.set('oracle', `the warm-start's demonstrations carry the oracle's skills (${file})`)
  }
  const mix = config.stage2.stage1Mix
  if (mix && mix.analyzerShare < 1) {
    const why = 'stage2.stage1Mix replays skill-reading demonstrations (analyzerShare < 1)'
    needs.set('expert_action', why)
    needs.set('oracle', why)
  }
  const row = ALGORITHMS[config.algorithm]
  if ((needsStage1(row) || needsLibrary(row)) && config.stage1.annotator.kind === 'oracle')
    needs.set('oracle', 'Stage 1 annotates with the oracle (stage1.annotator.kind "oracle"; "openai" asks an endpoint)')
  if (teacherSource(row) === 'oracle') {
    needs.set('expert_action', `${config.algorithm}'s teacher reads the expert's solution`)
    needs.set('oracle', `${config.algorithm}'s teacher reads the oracle's skill of the expert's solution`)
  }
  return needs
}

/**
 * Checks a run's remote environment before the run is recorded: the server answers, an episode opens (/create,
 * /reset) and closes, and it has every optional route the run needs. Fails with the URL and what is missing.
 */
export async function checkRemoteEnvironment(
  spec: HttpEnvConfig,
  config: Pick<RunConfig, 'warmstart' | 'stage1' | 'stage2' | 'algorithm'>,
): Promise<EnvironmentIdentity> {
  const env = remoteEnvironment(spec)
  let info: ServerInfo
  try {
    info = await env.info()
    const episode = await env.open(env.task('train', 0))
    await episode.close()
  } catch (error) {
    if (error instanceof EnvHttpError)
      throw new CorePhaseError(`the environment server ${spec.baseUrl} cannot be used: ${error.message}`)
    throw error
  }
  if ((config.warmstart?.skillBlind ?? 0) > 0 && !spec.prompt)
    throw new CorePhaseError(
      `warmstart.skillBlind shows prompts without their observation, which the run renders itself: give env.prompt ` +
        `(the server ${spec.baseUrl} would render its own prompts with /prompt)`,
    )
  const missing = [...routesNeeded(config)].filter(([route]) => !info.routes.includes(route))
  if (missing.length > 0)
    throw new CorePhaseError(
      `the environment server ${spec.baseUrl} lacks ${missing.map(([route, why]) => `/${route} (${why})`).join('; ')}; its GET /info lists ${info.routes.length ? info.routes.map((r) => `/${r}`).join(', ') : 'no optional route'}`,
    )
  return {
    kind: 'http',
    baseUrl: spec.baseUrl,
    ...(info.name === undefined ? {} : { name: info.name }),
    ...(info.version === undefined ? {} : { version: info.version }),
    routes: info.routes,
  }
}
