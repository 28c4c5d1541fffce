// A run's checkpoints as the CLI names them (`base`, `stage1`, an iteration k, `final`), for `seedflow eval`
// and `seedflow export`: the latest attempt of each (a recomputed phase writes beside the first), and the phase
// manifest that recorded it. A checkpoint that retention pruned is refused, naming the record that pruned it.

import type { PhaseManifest } from '../records/phase-manifest.ts'
import { parseRunConfig, type RunConfig } from '../seed/config.ts'
import type { ArtifactStore, ObjectInfo } from '../store/artifact-store.ts'
import { latestAttempt } from '../store/attempts.ts'
import { getJson } from '../store/json.ts'
import { assertValidRunId, type CheckpointFile, keys } from '../store/keys.ts'
import { readPruned } from '../store/pruned.ts'

/** A bad flag or an unknown run, iteration or checkpoint: the CLI prints the message and exits 1. */
export class RunInputError extends Error {
  override name = 'RunInputError'
}

const MODEL: CheckpointFile = 'model.safetensors'

/** The run's validated config, from its run.json. */
export async function recordedRunConfig(store: ArtifactStore, runId: string): Promise<RunConfig> {
  try {
    assertValidRunId(runId)
  } catch (error) {
    throw new RunInputError((error as Error).message)
  }
  const key = keys.runRecord(runId)
  if (!(await store.head(key))) throw new RunInputError(`unknown run ${runId}: no ${key} in ${store.location}`)
  const record = (await getJson(store, key)) as { config?: unknown }
  const parsed = parseRunConfig(record.config)
  if (!parsed.ok) throw new RunInputError(`run ${runId}: ${key} holds an invalid config: ${parsed.problems.join('; ')}`)
  return parsed.config
}

export interface RunCheckpoint {
  /** Key prefix of the folder, ending in '/'. */
  prefix: string
  /** What the phase that wrote it recorded for each file, when that manifest exists. */
  recorded?: Record<string, ObjectInfo>
  /** That phase manifest's key. */
  manifest?: string
}

interface Candidate {
  modelKey: (attempt: number) => string
  manifests: Array<(attempt: number) => string>
}

function candidate(runId: string, which: 'base' | 'stage1' | number): Candidate {
  if (which === 'base')
    return {
      modelKey: (a) => keys.baseCheckpoint(runId, MODEL, a),
      manifests: [
        (a) => keys.stagePhaseManifest(runId, 'warmstart', 0, a),
        (a) => keys.stagePhaseManifest(runId, 'import', 0, a),
      ],
    }
  if (which === 'stage1')
    return {
      modelKey: (a) => keys.sftCheckpoint(runId, MODEL, a),
      manifests: [(a) => keys.stagePhaseManifest(runId, 'sft', 0, a)],
    }
  return {
    modelKey: (a) => keys.checkpoint(runId, which, MODEL, a),
    manifests: [(a) => keys.phaseManifest(runId, which, 'update', 0, a)],
  }
}

/** The latest attempt of a checkpoint, or undefined when none was written; RunInputError when it was pruned. */
async function find(store: ArtifactStore, runId: string, which: 'base' | 'stage1' | number) {
  const pruned = await readPruned(store, runId)
  const c = candidate(runId, which)
  const attempt = await latestAttempt(
    store,
    c.modelKey,
    async (key) => pruned.has(key) || (await store.head(key)) !== undefined,
  )
  if (attempt === undefined) return undefined
  const modelKey = c.modelKey(attempt)
  const p = pruned.get(modelKey)
  if (p && !(await store.head(modelKey))) {
    throw new RunInputError(
      // the reason has parentheses of its own ("not among the last 1 (iteration 1)"): it is not nested in another pair
      `the checkpoint ${modelKey.slice(0, -MODEL.length)} of run ${runId} was pruned by retention on ${p.pruned.at} ` +
        `(recorded in ${p.record}): ${p.pruned.reason}; ` +
        'raise retention.keepLast or set retention.keepEvaluated to keep such checkpoints',
    )
  }
  const checkpoint: RunCheckpoint = { prefix: modelKey.slice(0, -MODEL.length) }
  for (const manifestKey of c.manifests.map((m) => m(attempt))) {
    if (!(await store.head(manifestKey))) continue
    const manifest = (await getJson(store, manifestKey)) as PhaseManifest
    const outputs = Object.values(manifest.outputs)
    if (!outputs.some((o) => o.key === modelKey)) continue
    checkpoint.recorded = Object.fromEntries(outputs.map((o) => [o.key, o]))
    checkpoint.manifest = manifestKey
  }
  return checkpoint
}

/** The checkpoint `which` (k, base, stage1 or final) of run `runId`. */
export async function runCheckpoint(
  store: ArtifactStore,
  runId: string,
  config: RunConfig,
  which: string,
): Promise<RunCheckpoint> {
  if (which === 'base' || which === 'stage1') {
    const found = await find(store, runId, which)
    if (!found) {
      const missing = candidate(runId, which).modelKey(0).slice(0, -MODEL.length)
      throw new RunInputError(
        `run ${runId} (algorithm ${config.algorithm}) has no ${which} checkpoint: ${missing} is missing`,
      )
    }
    return found
  }
  if (which === 'final') {
    for (let k = config.stage2.iterations - 1; k >= 0; k--) {
      const found = await find(store, runId, k)
      if (found) return found
    }
    for (const stage of ['stage1', 'base'] as const) {
      const found = await find(store, runId, stage)
      if (found) return found
    }
    throw new RunInputError(`run ${runId} has no checkpoint yet (not even ${keys.baseCheckpoint(runId, MODEL)})`)
  }
  const k = /^\d+$/.test(which) ? Number(which) : Number.NaN
  if (!Number.isSafeInteger(k) || k > 9999)
    throw new RunInputError(`unknown iteration ${JSON.stringify(which)}: use a number k, base, stage1 or final`)
  const found = await find(store, runId, k)
  if (!found) {
    throw new RunInputError(
      `run ${runId} has no checkpoint of iteration ${k}: ${keys.iterationPrefix(runId, k)}checkpoint/ is missing ` +
        `(the run plans ${config.stage2.iterations} iterations, 0 … ${config.stage2.iterations - 1})`,
    )
  }
  return found
}
