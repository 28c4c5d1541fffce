// What a `<checkpoint>` argument names, for every command that loads one (eval, generate, chat, serve): a
// folder (ours or a Hugging Face one), a store key prefix ending in checkpoint/, or a run's checkpoint
// (`--run <id> --iteration <k>`, k an iteration, base, stage1 or final).
import { stat } from 'node:fs/promises'
import { resolve } from 'node:path'
import type { Checkpoint } from '../policy/checkpoint.ts'
import { importHuggingFaceFolder } from '../policy/hf-import.ts'
import { loadCheckpoint } from '../records/checkpoint-store.ts'
import type { RunConfig } from '../seed/config.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { RunInputError, recordedRunConfig, runCheckpoint } from './run-checkpoint.ts'

/** Where a checkpoint came from. */
export interface CheckpointSource {
  kind: 'folder' | 'store'
  /** The folder (absolute) or the store key prefix (ending in '/'). */
  location: string
  /** The run and the `--iteration` value, when the checkpoint belongs to a run. */
  run?: string
  iteration?: string
}

export interface ResolvedCheckpoint {
  source: CheckpointSource
  load(): Promise<Checkpoint>
  /** The run's id and validated config when the checkpoint belongs to a run. */
  run?: { id: string; config: RunConfig }
}

async function isFolder(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory()
  } catch {
    return false
  }
}

/** The run id of a key under runs/<id>/, if any. */
function runOfKey(key: string): string | undefined {
  return /^runs\/([^/]+)\//.exec(key)?.[1]
}

/** Resolves a checkpoint argument (or `--run` / `--iteration`); the store is opened only when one is needed. */
export async function resolveCheckpoint(
  checkpoint: string | undefined,
  options: { run?: string | undefined; iteration?: string | undefined },
  store: () => ArtifactStore,
): Promise<ResolvedCheckpoint> {
  if (options.run !== undefined) {
    if (checkpoint !== undefined)
      throw new RunInputError('give either a checkpoint (folder or key) or --run <id> --iteration <k>, not both')
    const s = store()
    const config = await recordedRunConfig(s, options.run)
    const iteration = options.iteration ?? 'final'
    const { prefix } = await runCheckpoint(s, options.run, config, iteration)
    return {
      source: { kind: 'store', location: prefix, run: options.run, iteration },
      load: async () => (await loadCheckpoint(s, { prefix, sha256: '' })).checkpoint,
      run: { id: options.run, config },
    }
  }
  if (options.iteration !== undefined) throw new RunInputError('--iteration needs --run <id>')
  if (checkpoint === undefined)
    throw new RunInputError('give a checkpoint (a folder or a store key ending in checkpoint/) or --run <id>')
  if (await isFolder(checkpoint)) {
    const dir = resolve(checkpoint)
    return {
      source: { kind: 'folder', location: dir },
      load: async () => (await importHuggingFaceFolder(dir)).checkpoint,
    }
  }
  const prefix = checkpoint.endsWith('/') ? checkpoint : `${checkpoint}/`
  if (!/(^|\/)checkpoint(\.attempt-\d+)?\/$/.test(prefix))
    throw new RunInputError(
      `no checkpoint ${JSON.stringify(checkpoint)}: not a folder, and not a store key ending in checkpoint/`,
    )
  const s = store()
  if (!(await s.head(`${prefix}model.safetensors`)))
    throw new RunInputError(`no checkpoint at ${prefix} in ${s.location} (${prefix}model.safetensors is missing)`)
  const runId = runOfKey(prefix)
  const resolved: ResolvedCheckpoint = {
    source: { kind: 'store', location: prefix, ...(runId ? { run: runId } : {}) },
    load: async () => (await loadCheckpoint(s, { prefix, sha256: '' })).checkpoint,
  }
  if (runId) resolved.run = { id: runId, config: await recordedRunConfig(s, runId) }
  return resolved
}

/** How a command names the checkpoint to the user: `run r iteration k (key)` or the location. */
export function describeSource(source: CheckpointSource): string {
  return source.run
    ? `run ${source.run}${source.iteration ? ` iteration ${source.iteration}` : ''} (${source.location})`
    : source.location
}
