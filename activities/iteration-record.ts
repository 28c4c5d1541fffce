// The end of a Stage 2 iteration (docs/design.md §5.3): metrics.json from the phase manifests' statistics,
// through the phase wrapper (phase `metrics`), then manifest.json, which lists every artifact of the iteration
// with its sha256, bytes and parents. The iteration manifest is written last and with create-if-absent: its
// presence says the iteration is complete, and a rerun finds the same one.

import type {
  ArtifactRef,
  RecordIterationInput,
  RecordIterationSummary,
  RunRef,
  Snapshot,
} from '../records/contracts.ts'
import {
  type IterationMetricsRecord,
  iterationMetrics,
  METRIC_PHASES,
  type MetricPhase,
} from '../records/iteration-metrics.ts'
import type { PhaseManifest } from '../records/phase-manifest.ts'
import { SEEDFLOW_VERSION } from '../records/seedflow-version.ts'
import type { ArtifactStore, ObjectInfo } from '../store/artifact-store.ts'
import { latestAttempt } from '../store/attempts.ts'
import { IntegrityError } from '../store/errors.ts'
import { canonicalJson, getJson, putJson, putJsonIfAbsent } from '../store/json.ts'
import { keys } from '../store/keys.ts'
import { type Manifest, type ManifestEntry, manifestEntry } from '../store/manifest.ts'
import { type PrunedArtifact, readPruned } from '../store/pruned.ts'
import { type PhaseDeps, runPhase } from './phase.ts'

/** The snapshot phase's manifest: the attempt whose output is this snapshot. */
async function snapshotManifestKey(store: ArtifactStore, run: RunRef, iteration: number, snapshot: ArtifactRef) {
  for (let attempt = 0; ; attempt++) {
    const key = keys.phaseManifest(run.runId, iteration, 'snapshot', 0, attempt)
    if (!(await store.head(key))) break
    const manifest = (await getJson(store, key)) as PhaseManifest
    if (manifest.outputs?.snapshot?.sha256 === snapshot.sha256) return key
  }
  throw new IntegrityError(snapshot.key, snapshot.sha256, undefined, 'no snapshot phase manifest records it')
}

async function headOrFail(
  store: ArtifactStore,
  key: string,
  expected?: string,
  pruned?: ReadonlyMap<string, PrunedArtifact>,
): Promise<ObjectInfo> {
  const info = await store.head(key)
  const p = pruned?.get(key)
  if (!info && p && p.sha256 === expected) return { key, sha256: p.sha256, bytes: p.bytes } // removed on purpose
  if (!info || (expected !== undefined && info.sha256 !== expected)) {
    throw new IntegrityError(key, expected, info?.sha256, info ? 'changed since its phase recorded it' : 'missing')
  }
  return info
}

/**
 * Every artifact the iteration's phases recorded, their phase manifests and the given extras. An output's
 * parents are the artifacts whose sha256 its phase read (inputs are recorded by hash), plus the phase's extra
 * parents (the analyzing checkpoint of `analyze`, which it reads through the snapshot); a phase manifest's
 * parents are its outputs. Outputs that retention pruned since are listed as their phase recorded them.
 */
async function iterationArtifacts(
  store: ArtifactStore,
  phaseManifests: ReadonlyMap<string, PhaseManifest>,
  candidates: ReadonlyMap<string, string>,
  extraParents: ReadonlyMap<string, string[]>,
  pruned: ReadonlyMap<string, PrunedArtifact>,
): Promise<Record<string, ManifestEntry>> {
  const bySha = new Map<string, string[]>()
  const addCandidate = (key: string, sha256: string) => bySha.set(sha256, [...(bySha.get(sha256) ?? []), key])
  for (const [key, sha256] of candidates) addCandidate(key, sha256)
  const manifestInfo = new Map<string, ObjectInfo>()
  for (const [key, m] of phaseManifests) {
    const info = await headOrFail(store, key)
    manifestInfo.set(key, info)
    addCandidate(key, info.sha256)
    for (const o of Object.values(m.outputs)) addCandidate(o.key, o.sha256)
  }
  const artifacts: Record<string, ManifestEntry> = {}
  for (const [key, m] of phaseManifests) {
    const read = Object.values(m.inputs).flatMap((sha) => bySha.get(sha) ?? [])
    const parents = [...new Set([...read, ...(extraParents.get(m.scope.phase) ?? [])])].sort()
    for (const output of Object.values(m.outputs)) {
      artifacts[output.key] = manifestEntry(await headOrFail(store, output.key, output.sha256, pruned), parents)
    }
    const outputs = Object.values(m.outputs).map((o) => o.key)
    artifacts[key] = manifestEntry(manifestInfo.get(key) as ObjectInfo, outputs.sort())
  }
  return artifacts
}

export async function recordIteration(deps: PhaseDeps, input: RecordIterationInput): Promise<RecordIterationSummary> {
  const { store } = deps
  const { run, iteration } = input
  const pruned = await readPruned(store, run.runId)
  const phaseManifests = new Map<string, PhaseManifest>()
  const inputs: Record<string, string> = { snapshot: input.snapshot.sha256 }
  const snapshotKey = await snapshotManifestKey(store, run, iteration, input.snapshot)
  phaseManifests.set(snapshotKey, (await getJson(store, snapshotKey)) as PhaseManifest)
  const phases: IterationMetricsRecord['phases'] = {}
  for (const phase of METRIC_PHASES) {
    const shards = input.manifests[phase] ?? []
    if (shards.length === 0) continue
    const recorded: NonNullable<IterationMetricsRecord['phases'][MetricPhase]> = []
    for (const [i, key] of shards.entries()) {
      inputs[`${phase}/${i}`] = (await headOrFail(store, key)).sha256
      const manifest = (await getJson(store, key)) as PhaseManifest
      phaseManifests.set(key, manifest)
      recorded.push({ manifest: key, shard: manifest.scope.shard, stats: manifest.stats })
    }
    phases[phase] = recorded
  }
  const metrics = iterationMetrics(
    Object.fromEntries(Object.entries(phases).map(([phase, shards]) => [phase, shards.map((s) => s.stats)])),
  )
  const numbers = Object.fromEntries(
    Object.entries(metrics).filter((e): e is [string, number] => e[1] !== null),
  ) as Record<string, number>
  const result = await runPhase(
    deps,
    { runId: run.runId, phase: 'metrics', shard: 0, iteration },
    { configSha256: run.configSha256, inputs },
    async (ctx) => {
      const record: IterationMetricsRecord = {
        version: 1,
        runId: run.runId,
        iteration,
        algorithm: input.algorithm,
        configSha256: run.configSha256,
        metrics,
        phases,
      }
      return {
        outputs: { metrics: await putJson(store, keys.metrics(run.runId, iteration, ctx.attempt), record) },
        stats: numbers,
      }
    },
  )
  phaseManifests.set(result.manifestKey, (await getJson(store, result.manifestKey)) as PhaseManifest)

  // the checkpoints the snapshot names and the Stage 1 library are read by hash: resolve them as parents too
  const candidates = new Map<string, string>()
  const snapshot = (await getJson(store, input.snapshot.key, input.snapshot.sha256)) as Snapshot
  for (const ref of [snapshot.acting, snapshot.reference, snapshot.analyzer]) {
    if (ref) candidates.set(`${ref.prefix}model.safetensors`, ref.sha256)
  }
  const libraries = (await latestAttempt(store, (a) => keys.sftAnnotations(run.runId, a))) ?? -1
  for (let attempt = 0; attempt <= libraries; attempt++) {
    const library = await store.head(keys.sftAnnotations(run.runId, attempt))
    if (library) candidates.set(library.key, library.sha256)
  }
  const extraParents = new Map<string, string[]>()
  if (snapshot.analyzer) extraParents.set('analyze', [`${snapshot.analyzer.prefix}model.safetensors`])
  const manifest: Manifest = {
    version: 1,
    runId: run.runId,
    configSha256: run.configSha256,
    seedflowVersion: SEEDFLOW_VERSION,
    createdAt: new Date().toISOString(),
    artifacts: await iterationArtifacts(store, phaseManifests, candidates, extraParents, pruned),
  }
  const key = keys.iterationManifest(run.runId, iteration, result.attempt)
  const written = await putJsonIfAbsent(store, key, manifest)
  if (!written.created) {
    // a rerun (or a racing worker) wrote it first: it stands if it lists the same artifacts
    const theirs = (await getJson(store, key)) as Manifest
    if (canonicalJson(theirs.artifacts) !== canonicalJson(manifest.artifacts)) {
      throw new IntegrityError(key, written.info.sha256, undefined, 'it lists other artifacts than this iteration has')
    }
  }
  const metricsInfo = result.outputs.metrics as ObjectInfo
  return {
    manifestKey: result.manifestKey,
    reused: result.reused,
    outputs: { metrics: { key: metricsInfo.key, sha256: metricsInfo.sha256, bytes: metricsInfo.bytes } },
    stats: result.stats,
    manifest: { key, sha256: written.info.sha256, bytes: written.info.bytes },
  }
}
