// Fork: a run that starts from another run's stored checkpoint (`fork` in its configuration). The fork point's
// checkpoints are copied into this run (so its audit, retention and export stand alone): the base always; Stage
// 1's checkpoint and skill library from `stage1` on; iteration k's checkpoint (with its optimizer state) for a
// fork at `{ iteration: k }`, with the KL reference and analyzer that iteration's snapshot names.

import type { CheckpointRef, ForkPoint, ForkSummary, RunRef, Snapshot } from '../../records/contracts.ts'
import { ForkError } from '../../records/failures.ts'
import type { PhaseManifest } from '../../records/phase-manifest.ts'
import type { RunConfig } from '../../seed/config.ts'
import type { ArtifactStore, ObjectInfo } from '../../store/artifact-store.ts'
import { latestAttempt } from '../../store/attempts.ts'
import { getExpected, getJson } from '../../store/json.ts'
import { CHECKPOINT_FILES, keys, type Phase } from '../../store/keys.ts'
import { type PhaseDef, scopeOf } from '../phase-activity.ts'
import { checkpointOf, folderOf, MODEL_FILE } from '../phase-io.ts'

/** The latest finished manifest of a phase shard of the source run (a manifest is written last), if any. */
async function latestManifest(store: ArtifactStore, keyOf: (attempt: number) => string) {
  const attempt = await latestAttempt(store, keyOf)
  return attempt === undefined ? undefined : ((await getJson(store, keyOf(attempt))) as PhaseManifest)
}

const stageManifest = (store: ArtifactStore, runId: string, phase: Phase) =>
  latestManifest(store, (a) => keys.stagePhaseManifest(runId, phase, 0, a))

const iterationManifest = (store: ArtifactStore, runId: string, k: number, phase: Phase) =>
  latestManifest(store, (a) => keys.phaseManifest(runId, k, phase, 0, a))

/** A checkpoint's files (file name → what the manifest recorded). */
type Files = Record<string, ObjectInfo>

/**
 * The checkpoint among a manifest's outputs under `prefix` ('' for a phase that wrote one folder; `base/`,
 * `stage1/`, `iteration/` for a fork's copies); undefined without a model file.
 */
function filesOf(manifest: PhaseManifest | undefined, prefix = ''): Files | undefined {
  const files: Files = {}
  for (const file of CHECKPOINT_FILES) {
    const info = manifest?.outputs[`${prefix}${file}`]
    if (info) files[file] = info
  }
  return files[MODEL_FILE] ? files : undefined
}

/**
 * What the fork copies from the source run: its base, its Stage 1 and skill library, iteration k's checkpoint and
 * the sha256 of that iteration's KL reference. Each as the source computed it, or as the source copied it when it
 * was a fork itself.
 */
async function sources(store: ArtifactStore, from: string, at: ForkPoint) {
  const where = `fork of run ${from} at ${typeof at === 'object' ? `iteration ${at.iteration}` : at}`
  const forked = await stageManifest(store, from, 'fork')
  const sft = await stageManifest(store, from, 'sft')
  const base =
    filesOf(await stageManifest(store, from, 'warmstart')) ??
    filesOf(await stageManifest(store, from, 'import')) ??
    filesOf(forked, 'base/')
  if (!base) throw new ForkError(`${where}: run ${from} has no base checkpoint (no warmstart, import or fork manifest)`)
  const stage1 = at === 'base' ? undefined : (filesOf(sft) ?? filesOf(forked, 'stage1/'))
  if (at === 'stage1' && !stage1) throw new ForkError(`${where}: run ${from} has no Stage 1`)
  // the skill library: Stage 1's annotations, those of `annotate` (rows that read it without Stage 1), or a copy
  const library =
    at === 'base'
      ? undefined
      : (sft?.outputs.annotations ??
        (await stageManifest(store, from, 'annotate'))?.outputs.annotations ??
        forked?.outputs.annotations)
  let iteration: { files: Files; reference: string } | undefined
  if (typeof at === 'object') {
    const k = at.iteration
    const update = filesOf(await iterationManifest(store, from, k, 'update'))
    const snap = (await iterationManifest(store, from, k, 'snapshot'))?.outputs.snapshot
    const copiedAt = forked?.stats.iteration === k + 1 ? filesOf(forked, 'iteration/') : undefined
    if (update && snap) {
      const snapshot = (await getJson(store, snap.key, snap.sha256)) as Snapshot
      iteration = { files: update, reference: snapshot.reference.sha256 }
    } else if (copiedAt) {
      const reference = forked?.stats.referenceIsStage1 ? stage1 : base
      iteration = { files: copiedAt, reference: reference?.[MODEL_FILE]?.sha256 ?? '' }
    } else throw new ForkError(`${where}: run ${from} has not finished iteration ${k}`)
  }
  return { base, stage1, iteration, library }
}

/** Copies a checkpoint's files into `prefix` of this run, verifying each by its sha256. */
async function copyCheckpoint(store: ArtifactStore, files: Files, prefix: string, what: string) {
  const outputs: Record<string, ObjectInfo> = {}
  for (const [file, info] of Object.entries(files)) {
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
        const outputs = await copyCheckpoint(
          store,
          src.base,
          folderOf(keys.baseCheckpoint(run.runId, MODEL_FILE, attempt)),
          'base',
        )
        if (src.stage1) {
          const prefix = folderOf(keys.sftCheckpoint(run.runId, MODEL_FILE, attempt))
          Object.assign(outputs, await copyCheckpoint(store, src.stage1, prefix, 'stage1'))
        }
        const annotations = src.library
        if (annotations)
          outputs.annotations = await store.put(
            keys.sftAnnotations(run.runId, attempt),
            await getExpected(store, annotations.key, annotations.sha256),
          )
        let next = 0
        let referenceIsStage1 = src.stage1 !== undefined
        if (src.iteration && typeof fork.at === 'object') {
          const k = fork.at.iteration
          const prefix = folderOf(keys.checkpoint(run.runId, k, MODEL_FILE, attempt))
          Object.assign(outputs, await copyCheckpoint(store, src.iteration.files, prefix, 'iteration'))
          const reference = src.iteration.reference
          referenceIsStage1 = outputs[`stage1/${MODEL_FILE}`]?.sha256 === reference
          if (!referenceIsStage1 && outputs[`base/${MODEL_FILE}`]?.sha256 !== reference)
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
