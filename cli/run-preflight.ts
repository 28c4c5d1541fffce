// What `seedflow run` checks before it starts anything (a server, a workflow): settings that would otherwise fail
// the run minutes later inside a phase, far from the command that could have said so at once.
import { boundedMessage } from '../infra/bounded-text.ts'
import { ALGORITHMS, needsLibrary, needsStage1 } from '../seed/algorithms.ts'
import type { RunConfig } from '../seed/config.ts'
import type { ArtifactStore, StoreIdentity } from '../store/artifact-store.ts'
import { InvalidFaultSpec, validateFaultVariable } from '../workers/faults.ts'
import { CliError } from './run-client.ts'

/** Whether the run calls its Stage 1 annotator: its row makes Stage 1 or reads the library, from its own base. */
export function runAnnotates(config: RunConfig): boolean {
  const row = ALGORITHMS[config.algorithm]
  const fromOwnBase = config.fork === undefined || config.fork.at === 'base'
  return fromOwnBase && (needsStage1(row) || needsLibrary(row))
}

/** The refusal of a run whose external annotator's key variable is unset in `env`; undefined when none. */
export function annotatorKeyProblem(config: RunConfig, env: NodeJS.ProcessEnv): string | undefined {
  const annotator = config.stage1.annotator
  if (annotator.kind !== 'openai' || !runAnnotates(config)) return undefined
  const name = annotator.apiKeyEnv
  if (env[name] !== undefined && env[name] !== '') return undefined
  return (
    `stage1.annotator is ${annotator.baseUrl} with its key in ${name}, which is not set here: set ${name} (any ` +
    `non-empty value for a server without keys) for this command, whose worker annotates, and for every ` +
    `\`seedflow worker\` that serves the run (restart a running one with it); nothing was started`
  )
}

/** The checks that need no server: SEEDFLOW_FAULT and the annotator's key. A CliError naming every problem. */
export function checkRunSettings(config: RunConfig, env: NodeJS.ProcessEnv = process.env): void {
  const problems: string[] = []
  try {
    validateFaultVariable(env)
  } catch (error) {
    if (!(error instanceof InvalidFaultSpec)) throw error
    problems.push(error.message)
  }
  const key = annotatorKeyProblem(config, env)
  if (key) problems.push(key)
  if (problems.length > 0) throw new CliError(`seedflow run cannot start:\n  ${problems.join('\n  ')}`)
}

/**
 * The store's identity, which the run records (one store per run), read with this command's credentials: a
 * refused or unreachable store stops the command before the workflow starts, not in its first phase.
 */
export async function checkStoreAccess(store: ArtifactStore): Promise<StoreIdentity> {
  try {
    return await store.identity()
  } catch (error) {
    throw new CliError(
      `seedflow run cannot use the artifact store ${store.location}: ${boundedMessage(error)}; the workers of the ` +
        'run need the same settings (SEEDFLOW_S3_*, AWS_* credentials); nothing was started',
    )
  }
}
