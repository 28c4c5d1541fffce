// Fork: a run that starts from another run's stored checkpoint (`fork` in its configuration). The fork point's
// checkpoints are copied into this run (so its audit, retention and export stand alone): the base always; Stage
// 1's checkpoint and skill library from `stage1` on; iteration k's checkpoint (with its optimizer state) for a
// fork at `{ iteration: k }`, with the KL reference and analyzer that iteration's snapshot names.

import type { RunConfig } from '../../seed/config.ts'
import type { ArtifactStore, ObjectInfo } from '../../store/artifact-store.ts'
import { latestAttempt } from '../../store/attempts.ts'
import { getExpected, getJson } from '../../store/json.ts'
import { CHECKPOINT_FILES, keys, type Phase } from '../../store/keys.ts'
import type { CheckpointRef, ForkPoint, ForkSummary, RunRef, Snapshot } from '../contracts.ts'
import { ForkError } from '../failures.ts'
import type { PhaseManifest } from '../phase.ts'
import { type PhaseDef, scopeOf } from '../phase-activity.ts'
import { checkpointOf, folderOf } from '../phase-io.ts'

/** The latest finished manifest of a phase shard of the source run (a manifest is written last), if any. */
async function latestManifest(store: ArtifactStore, keyOf: (attempt: number) => string) {
  const attempt = await latestAttempt(store, keyOf)
  return attempt === undefined ? undefined : ((await getJson(store, keyOf(attempt))) as PhaseManifest)
}

const stageManifest = (store: ArtifactStore, runId: string, phase: Phase) =>
  latestManifest(store, (a) => keys.stagePhaseManifest(runId, phase, 0, a))

const iterationManifest = (store: ArtifactStore, runId: string, k: number, phase: Phase) =>
  latestManifest(store, (a) => keys.phaseManifest(runId, k, phase, 0, a))

/** What the fork reads from the source run: the manifests of the checkpoints it copies. */
async function sources(store: ArtifactStore, from: string, at: ForkPoint) {
  const where = `fork of run ${from} at ${typeof at === 'object' ? `iteration ${at.iteration}` : at}`
  const base = (await stageManifest(store, from, 'warmstart')) ?? (await stageManifest(store, from, 'import'))
  if (!base) throw new ForkError(`${where}: run ${from} has no base checkpoint (no warmstart or import manifest)`)
  const stage1 = at === 'base' ? undefined : await stageManifest(store, from, 'sft')
  if (at === 'stage1' && !stage1) throw new ForkError(`${where}: run ${from} has no Stage 1 (no sft manifest)`)
  let iteration: { update: PhaseManifest; snapshot: Snapshot } | undefined
  if (typeof at === 'object') {
    const update = await iterationManifest(store, from, at.iteration, 'update')
    const snap = await iterationManifest(store, from, at.iteration, 'snapshot')
    if (!update || !snap?.outputs.snapshot)
      throw new ForkError(`${where}: run ${from} has not finished iteration ${at.iteration}`)
    iteration = { update, snapshot: (await getJson(store, snap.outputs.snapshot.key)) as Snapshot }
  }
  // the skill library: Stage 1's annotations, or those of `annotate` in runs that read it without Stage 1
  const library = at === 'base' ? undefined : (stage1 ?? (await stageManifest(store, from, 'annotate')))
  return { base, stage1, iteration, library }
}

/** Copies the checkpoint files a manifest records into `prefix` of this run, verifying each by its sha256. */
async function copyCheckpoint(store: ArtifactStore, manifest: PhaseManifest, prefix: string, what: string) {
  const outputs: Record<string, ObjectInfo> = {}
  for (const file of CHECKPOINT_FILES) {
    const info = manifest.outputs[file]
    if (!info) continue
    if (!(await store.head(info.key)))
      throw new ForkError(`${what}: ${info.key} is gone (pruned by the source run's retention?)`)
    outputs[`${what}/${file}`] = await store.put(`${prefix}${file}`, await getExpected(store, info.key, info.sha256))
  }
  return outputs
}

/** The checkpoint of one copied folder among the fork's outputs. */
function copied(outputs: Record<string, ObjectInfo>, what: string): CheckpointRef | null {
  const picked = Object.fromEntries(
    Object.entries(outputs)
      .filter(([name]) => name.startsWith(`${what}/`))
      .map(([name, info]) => [name.slice(what.length + 1), info]),
  )
  return Object.keys(picked).length === 0 ? null : checkpointOf(picked, `fork ${what}`)
}

const needs = (c: RunConfig) => {
  if (!c.fork) throw new ForkError('the run has no fork in its configuration')
  return c.fork
}

export const forkPhase: PhaseDef<{ run: RunRef }, NonNullable<RunConfig['fork']>, ForkSummary> = {
  describe: () => 'fork',
  needs,
  async plan({ run }, fork) {
    return {
      scope: scopeOf(run, 'fork', 0),
      inputs: {},
      async compute({ store, attempt }) {
        const src = await sources(store, fork.run, fork.at)
        const model = 'model.safetensors'
        const outputs = await copyCheckpoint(
          store,
          src.base,
          folderOf(keys.baseCheckpoint(run.runId, model, attempt)),
          'base',
        )
        if (src.stage1) {
          const prefix = folderOf(keys.sftCheckpoint(run.runId, model, attempt))
          Object.assign(outputs, await copyCheckpoint(store, src.stage1, prefix, 'stage1'))
        }
        const annotations = src.library?.outputs.annotations
        if (annotations)
          outputs.annotations = await store.put(
            keys.sftAnnotations(run.runId, attempt),
            await getExpected(store, annotations.key, annotations.sha256),
          )
        let next = 0
        let referenceIsStage1 = src.stage1 !== undefined
        if (src.iteration && typeof fork.at === 'object') {
          const k = fork.at.iteration
          const prefix = folderOf(keys.checkpoint(run.runId, k, 'model.safetensors', attempt))
          Object.assign(outputs, await copyCheckpoint(store, src.iteration.update, prefix, 'iteration'))
          const reference = src.iteration.snapshot.reference.sha256
          referenceIsStage1 = outputs['stage1/model.safetensors']?.sha256 === reference
          if (!referenceIsStage1 && outputs['base/model.safetensors']?.sha256 !== reference)
            throw new ForkError(
              `fork of run ${fork.run} at iteration ${k}: its KL reference is neither its base nor its Stage 1`,
            )
          next = k + 1
        }
        return { outputs, stats: { iteration: next, referenceIsStage1: referenceIsStage1 ? 1 : 0 } }
      },
    }
  },
  result(summary, outputs) {
    const base = copied(outputs, 'base') as CheckpointRef
    const stage1 = copied(outputs, 'stage1')
    const start = summary.stats.referenceIsStage1 ? (stage1 as CheckpointRef) : base
    return {
      ...summary,
      base,
      stage1,
      iteration: summary.stats.iteration ?? 0,
      reference: start,
      acting: copied(outputs, 'iteration') ?? start,
    }
  },
}
