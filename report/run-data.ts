// What the run report shows of one run, read from the store alone (no Temporal): the run record and plan, every
// complete iteration's metrics, every evaluation (a fork's start evaluations from the run it forked), the
// hyperparameter changes, Stage 1's annotation counts and where the time went. Works for a finished, running or
// failed run: what is not written yet is simply absent, what cannot be read is named, and the latest attempt of
// each artifact is the one read.
import { UnknownRunError } from '../records/audit.ts'
import type { RunPlan } from '../records/contracts.ts'
import { type RecordedHyperparameterChange, readHyperparameterChanges } from '../records/hyperparameters.ts'
import type { IterationMetricsRecord } from '../records/iteration-metrics.ts'
import { METRIC_PHASES } from '../records/iteration-metrics.ts'
import type { RunRecord } from '../records/record-run.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { getJson } from '../store/json.ts'
import { keys } from '../store/keys.ts'
import type { Manifest } from '../store/manifest.ts'
import { type AnnotatingManifest, type AnnotationData, annotationOf } from './annotation-data.ts'
import { type DamagedArtifact, DamageLog } from './damage.ts'
import { listRun, type RunListing } from './run-listing.ts'

export interface IterationData {
  iteration: number
  /** When the iteration's manifest was written (its end). */
  finishedAt: string
  metrics: IterationMetricsRecord['metrics']
  /** The configuration the iteration ran under (the run's, or the effective one after hyperparameter changes). */
  configSha256: string
  /** Σ new tokens / Σ seconds of the rollout shards (sampling throughput); null without both. */
  rolloutTokensPerSecond: number | null
  /** Its rollouts, skills and rescore files are all still stored (retention has not pruned them): the skill page can show it. */
  inspectable: boolean
}

export interface EvaluationData {
  label: string
  /** `base`, `stage1` or `iteration`. */
  kind: string
  /** The iteration whose checkpoint was evaluated; −1 before Stage 2. */
  iteration: number
  split: string
  success: number
  standardError: number
  macroSuccess: number | null
  tasks: number
  perFamily: Record<string, { tasks: number; successRate: number }>
  checkpointSha256: string | null
  seconds: number
  /** The run this evaluation was read from, when it is not the reported run (a fork's start). */
  from?: string
}

export interface RunData {
  runId: string
  record: RunRecord
  plan: RunPlan | null
  iterations: IterationData[]
  evaluations: EvaluationData[]
  hyperparameters: RecordedHyperparameterChange[]
  /** Compute seconds of the run-level phases before Stage 2 (warmstart, sft, import, annotate, fork). */
  stageSeconds: Record<string, number>
  /** The newest `createdAt` of what was read: when the run last wrote something the report shows. */
  lastWrite: string
  /** Complete iterations of the planned ones, and whether the last evaluation the plan asks for is there. */
  progress: { complete: number; planned: number | null; finished: boolean }
  /** Stage 1's annotation counts, where the run annotated (null: no annotating phase has finished). */
  annotation: AnnotationData | null
  /** Artifacts that could not be read (what they hold is missing from the rest), in the order met. */
  damaged: DamagedArtifact[]
}

const STAGE_PHASES = ['warmstart', 'import', 'annotate', 'sft', 'fork'] as const
/** The run-level phases whose manifest records Stage 1's annotation counts. */
const ANNOTATING = new Set<string>(['annotate', 'sft'])

/** What the report shows of a run whose run.json cannot be read: its id, and blanks the page shows as such. */
function unreadableRecord(runId: string): RunRecord {
  return { runId, config: {}, configSha256: '', seedflowVersion: '?', createdAt: '' }
}

/**
 * Reads everything the report shows of `runId`; UnknownRunError when the store has no such run. An artifact that
 * cannot be read (corrupt, half-written, vanished) is left out and named in `damaged`, the rest is read as usual.
 * `listing`: the run's keys when the caller listed them already (it reads more of the run).
 */
export async function readRunData(store: ArtifactStore, runId: string, listing?: RunListing): Promise<RunData> {
  listing ??= await listRun(store, runId)
  if (!listing.has(keys.runRecord(runId))) {
    throw new UnknownRunError(`unknown run ${runId}: no ${keys.runRecord(runId)} in ${store.location}`)
  }
  const damage = new DamageLog()
  const json = <T>(key: string) => damage.read(key, async () => (await getJson(store, key)) as T)
  const record = (await json<RunRecord>(keys.runRecord(runId))) ?? unreadableRecord(runId)
  const plan = listing.has(keys.runPlan(runId)) ? ((await json<RunPlan>(keys.runPlan(runId))) ?? null) : null
  let lastWrite = record.createdAt
  const seen = (at: string | undefined) => {
    if (at && at > lastWrite) lastWrite = at
  }

  const iterations: IterationData[] = []
  for (const k of listing.iterations()) {
    const manifestKey = listing.latest((a) => keys.iterationManifest(runId, k, a))
    const metricsKey = listing.latest((a) => keys.metrics(runId, k, a))
    if (!manifestKey || !metricsKey) continue // running, or failed inside the iteration
    const manifest = await json<Manifest>(manifestKey)
    const metrics = await json<IterationMetricsRecord>(metricsKey)
    if (!manifest || !metrics) continue // damaged: named in `damaged`
    seen(manifest.createdAt)
    iterations.push({
      iteration: k,
      finishedAt: manifest.createdAt,
      metrics: metrics.metrics,
      configSha256: metrics.configSha256,
      rolloutTokensPerSecond: throughput(metrics),
      inspectable: inspectable(manifest, listing),
    })
  }

  const evaluations = await readEvaluations(store, listing, damage)
  if (plan?.fork) {
    const parent = await listRun(store, plan.fork.runId)
    const start = (await readEvaluations(store, parent, damage)).filter(
      (e) => e.kind === 'base' || (plan.fork?.at === 'stage1' && e.kind === 'stage1'),
    )
    evaluations.unshift(...start.map((e) => ({ ...e, from: plan.fork?.runId as string })))
  }

  const stageSeconds: Record<string, number> = {}
  let annotation: AnnotationData | null = null
  for (const phase of STAGE_PHASES) {
    for (const key of listing.stageManifests(phase)) {
      const m = await json<AnnotatingManifest & { stats?: Record<string, number>; createdAt?: string }>(key)
      if (!m) continue
      seen(m.createdAt)
      const seconds = m.stats?.seconds
      if (typeof seconds === 'number') stageSeconds[phase] = (stageSeconds[phase] ?? 0) + seconds
      if (ANNOTATING.has(phase)) annotation = (await annotationOf(store, phase, m, damage)) ?? annotation
    }
  }

  const { changes: hyperparameters, unreadable } = await readHyperparameterChanges(store, runId)
  for (const { key, error } of unreadable) damage.note(key, error)

  const planned = plan?.iterations ?? null
  const lastIteration = planned === null ? undefined : planned - 1
  const finished =
    planned !== null &&
    iterations.length === planned &&
    (planned === 0 || evaluations.some((e) => e.kind === 'iteration' && e.iteration === lastIteration))
  return {
    runId,
    record,
    plan,
    iterations,
    evaluations,
    hyperparameters,
    stageSeconds,
    annotation,
    lastWrite,
    progress: { complete: iterations.length, planned, finished },
    damaged: damage.items,
  }
}

const INSPECTED = /\/iterations\/\d{4}\/(rollouts|rescore)\//

/** Every rollout and rescore file the iteration's manifest lists is still in the store. */
function inspectable(manifest: Manifest, listing: RunListing): boolean {
  const wanted = Object.keys(manifest.artifacts).filter((key) => INSPECTED.test(key))
  return wanted.length > 0 && wanted.every((key) => listing.has(key))
}

function throughput(record: IterationMetricsRecord): number | null {
  const shards = record.phases.rollout ?? []
  const tokens = shards.reduce((a, s) => a + (s.stats.newTokens ?? 0), 0)
  const seconds = shards.reduce((a, s) => a + (s.stats.seconds ?? 0), 0)
  return tokens > 0 && seconds > 0 ? tokens / seconds : null
}

interface StoredEvaluation {
  label: string
  target?: { kind: string; iteration?: number }
  iteration: number
  split: string
  successRate: number
  standardError: number
  macroSuccessRate?: number
  tasks: number
  perFamily?: Record<string, { tasks: number; successRate: number }>
  checkpoint?: { sha256?: string }
  seconds?: number
}

/** The latest attempt of every evaluation of the run, start evaluations first, then by iteration. */
async function readEvaluations(
  store: ArtifactStore,
  listing: RunListing,
  damage: DamageLog,
): Promise<EvaluationData[]> {
  const out: EvaluationData[] = []
  for (const key of listing.evaluations()) {
    const e = await damage.read(key, async () => (await getJson(store, key)) as StoredEvaluation)
    if (!e) continue
    const kind = e.target?.kind ?? (e.iteration >= 0 ? 'iteration' : e.label.startsWith('stage1') ? 'stage1' : 'base')
    out.push({
      label: e.label,
      kind,
      iteration: e.iteration,
      split: e.split,
      success: e.successRate,
      standardError: e.standardError,
      macroSuccess: e.macroSuccessRate ?? null,
      tasks: e.tasks,
      perFamily: e.perFamily ?? {},
      checkpointSha256: e.checkpoint?.sha256 ?? null,
      seconds: e.seconds ?? 0,
    })
  }
  const order = (e: EvaluationData) => (e.kind === 'base' ? -2 : e.kind === 'stage1' ? -1 : e.iteration)
  return out.sort((a, b) => order(a) - order(b) || a.split.localeCompare(b.split))
}

/** Compute seconds of one phase in one part of a run: `start` (before Stage 2) or an iteration with its evaluations. */
export interface PhaseTime {
  /** `start` or the iteration's number, as text. */
  part: string
  /** −1 for `start`, else the iteration: the parts' order. */
  order: number
  phase: string
  seconds: number
}

/**
 * Where a run's compute time went, phase by phase (shards' seconds summed, so parallel shards add up): the
 * run-level phases and start evaluations under `start`, each iteration's phases and the evaluation of its
 * checkpoint under the iteration. A fork's start evaluations are its parent's time and left out.
 */
export function phaseTimes(run: RunData): PhaseTime[] {
  const out: PhaseTime[] = []
  const add = (order: number, phase: string, seconds: number | null) => {
    if (seconds && seconds > 0) out.push({ part: order < 0 ? 'start' : String(order), order, phase, seconds })
  }
  for (const [phase, seconds] of Object.entries(run.stageSeconds)) add(-1, phase, seconds)
  for (const e of run.evaluations) if (!e.from) add(e.kind === 'iteration' ? e.iteration : -1, 'evaluate', e.seconds)
  for (const it of run.iterations) {
    for (const phase of METRIC_PHASES) add(it.iteration, phase, it.metrics[`timing/${phase}_s`] ?? null)
  }
  return out
}
