// The one wrapper that makes every phase idempotent (docs/design.md §4): a phase shard first looks for its own
// finished manifest; if the manifest's config hash and input hashes match the current ones and its outputs are
// intact, it is returned without recomputing. Otherwise the shard is computed under the first attempt number
// with no matching manifest (older attempts stay for audit), its outputs written, and its manifest written last
// with create-if-absent, so two workers racing on one shard agree on one result.
import type { PhaseManifest, PhaseScope } from '../records/phase-manifest.ts'
import { SEEDFLOW_VERSION } from '../records/seedflow-version.ts'
import type { ArtifactStore, ObjectInfo } from '../store/artifact-store.ts'
import { rehashStored } from '../store/hash.ts'
import { getJson, putJson, putJsonIfAbsent } from '../store/json.ts'
import { keys, type Phase } from '../store/keys.ts'
import { wasPruned } from '../store/pruned.ts'
import { type Damage, DamagedArtifactsError } from './damaged-artifacts.ts'

export interface PhaseResult<S> {
  manifestKey: string
  attempt: number
  /** True when a finished manifest was found and nothing was computed. */
  reused: boolean
  outputs: Record<string, ObjectInfo>
  stats: S
}

export interface PhaseContext {
  attempt: number
  /** Partial progress of this attempt (heartbeat-resumable); undefined when there is none. */
  loadProgress<T>(): Promise<T | undefined>
  saveProgress(value: unknown): Promise<void>
}

/**
 * What the wrapper did with one phase shard: `computing` when it starts the phase body (no reusable manifest),
 * then `computed` once its manifest is written; `reused` when a finished manifest was returned instead (also after
 * `computing`, when another worker wrote the same attempt's manifest first).
 */
export interface PhaseEvent {
  event: 'computing' | 'computed' | 'reused'
  scope: PhaseScope
  attempt: number
  /** `computed` and `reused`: seconds in the wrapper (looking up manifests, computing, writing the manifest). */
  seconds?: number
  /** `computed` and `reused`: the statistics the manifest records. */
  stats?: unknown
}

/**
 * How often the wrapper computed and reused, per phase: what tests and metrics read. An optional listener
 * sees every event after the counts are updated (a worker's counters file, for instance).
 */
export class PhaseCounters {
  readonly computed = new Map<Phase, number>()
  readonly reused = new Map<Phase, number>()

  readonly #listener: ((event: PhaseEvent, counters: PhaseCounters) => void) | undefined

  constructor(listener?: (event: PhaseEvent, counters: PhaseCounters) => void) {
    this.#listener = listener
  }

  count(phase: Phase, reused: boolean): void {
    const table = reused ? this.reused : this.computed
    table.set(phase, (table.get(phase) ?? 0) + 1)
  }

  /** Counts a finished shard (`computed` or `reused`) and tells the listener; `computing` only tells it. */
  record(event: PhaseEvent): void {
    if (event.event !== 'computing') this.count(event.scope.phase, event.event === 'reused')
    this.#listener?.(event, this)
  }
}

function manifestKey(scope: PhaseScope, attempt: number): string {
  return scope.iteration === undefined
    ? keys.stagePhaseManifest(scope.runId, scope.phase, scope.shard, attempt)
    : keys.phaseManifest(scope.runId, scope.iteration, scope.phase, scope.shard, attempt)
}

function progressKey(scope: PhaseScope, attempt: number): string {
  return scope.iteration === undefined
    ? keys.stagePhaseProgress(scope.runId, scope.phase, scope.shard, attempt)
    : keys.phaseProgress(scope.runId, scope.iteration, scope.phase, scope.shard, attempt)
}

function sameInputs(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a).sort()
  const kb = Object.keys(b).sort()
  return ka.length === kb.length && ka.every((k, i) => k === kb[i] && a[k] === b[k])
}

/**
 * A manifest is reusable when it was made from the same config and inputs and its outputs are intact or were
 * pruned on purpose by retention (a finished phase stays finished; a later phase that needs a pruned checkpoint
 * fails naming its key). Intact means the bytes, re-hashed in full: a store's head answers the sha256 it recorded,
 * which a flipped bit does not change. A missing output, or one written again since, makes the manifest unusable
 * (its phase computes again); bytes that fail the store's own check are fatal, every damaged output named, so
 * that the run waits for an operator.
 */
async function reusable<S>(
  store: ArtifactStore,
  manifest: PhaseManifest<S>,
  configSha256: string,
  inputs: Record<string, string>,
) {
  if (manifest.configSha256 !== configSha256 || !sameInputs(manifest.inputs, inputs)) return false
  const damaged: Damage[] = []
  for (const output of Object.values(manifest.outputs)) {
    const found = await rehashStored(store, output.key)
    if ('missing' in found) {
      if (await wasPruned(store, manifest.scope.runId, output)) continue
      return false
    }
    if (found.refused) damaged.push({ kind: 'hash', key: output.key, message: found.refused.message })
    else if (found.sha256 !== output.sha256) return false // written again since, with its own record: not this manifest's
  }
  if (damaged.length > 0) throw new DamagedArtifactsError(manifest.scope.runId, damaged)
  return true
}

/** A phase shard, as hooks see it. */
export interface PhasePlace {
  phase: Phase
  shard: number
  /** `rollout shard 1 of iteration 0 of run r`, for messages. */
  description: string
}

/**
 * Hooks around the computing of a phase shard; a worker's composition root fills them (fault injection:
 * workers/faults.ts). Neither runs for a reused shard.
 */
export interface PhaseHooks {
  /** Runs the phase body: calls `body` once and returns (or throws) what it does. */
  around?<T>(place: PhasePlace, body: () => Promise<T>): Promise<T>
  /** After the shard's manifest is written and counted, before runPhase returns. */
  afterManifest?(place: PhasePlace): void
}

export interface PhaseDeps {
  store: ArtifactStore
  counters?: PhaseCounters
  hooks?: PhaseHooks
  now?: () => Date
}

const MAX_ATTEMPTS = 100

export async function runPhase<S>(
  deps: PhaseDeps,
  scope: PhaseScope,
  spec: { configSha256: string; inputs: Record<string, string>; hyperparameters?: Record<string, unknown> },
  compute: (ctx: PhaseContext) => Promise<{ outputs: Record<string, ObjectInfo>; stats: S }>,
): Promise<PhaseResult<S>> {
  const { store } = deps
  const started = performance.now()
  const seconds = () => (performance.now() - started) / 1000
  const place: PhasePlace = {
    phase: scope.phase,
    shard: scope.shard,
    description: `${scope.phase} shard ${scope.shard}${scope.iteration === undefined ? '' : ` of iteration ${scope.iteration}`} of run ${scope.runId}`,
  }
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const key = manifestKey(scope, attempt)
    if (await store.head(key)) {
      const manifest = (await getJson(store, key)) as PhaseManifest<S>
      if (await reusable(store, manifest, spec.configSha256, spec.inputs)) {
        deps.counters?.record({ event: 'reused', scope, attempt, seconds: seconds(), stats: manifest.stats })
        return { manifestKey: key, attempt, reused: true, outputs: manifest.outputs, stats: manifest.stats }
      }
      continue // made from another config or other inputs, or an output is gone: keep it, try the next attempt
    }
    const progress = progressKey(scope, attempt)
    deps.counters?.record({ event: 'computing', scope, attempt })
    const body = () =>
      compute({
        attempt,
        loadProgress: async <T>() =>
          (await store.head(progress)) ? ((await getJson(store, progress)) as T) : undefined,
        saveProgress: async (value) => {
          await putJson(store, progress, value)
        },
      })
    const { outputs, stats } = await (deps.hooks?.around ? deps.hooks.around(place, body) : body())
    const manifest: PhaseManifest<S> = {
      version: 1,
      scope,
      attempt,
      configSha256: spec.configSha256,
      inputs: spec.inputs,
      ...(spec.hyperparameters ? { hyperparameters: spec.hyperparameters } : {}),
      outputs,
      stats,
      seedflowVersion: SEEDFLOW_VERSION,
      createdAt: (deps.now ?? (() => new Date()))().toISOString(),
    }
    const written = await putJsonIfAbsent(store, key, manifest)
    if (!written.created) {
      // another worker finished this attempt first: its result stands if it matches, else go on
      const theirs = (await getJson(store, key)) as PhaseManifest<S>
      if (await reusable(store, theirs, spec.configSha256, spec.inputs)) {
        deps.counters?.record({ event: 'reused', scope, attempt, seconds: seconds(), stats: theirs.stats })
        return { manifestKey: key, attempt, reused: true, outputs: theirs.outputs, stats: theirs.stats }
      }
      continue
    }
    deps.counters?.record({ event: 'computed', scope, attempt, seconds: seconds(), stats })
    deps.hooks?.afterManifest?.(place)
    return { manifestKey: key, attempt, reused: false, outputs, stats }
  }
  throw new Error(`${scope.phase} shard ${scope.shard} of run ${scope.runId}: ${MAX_ATTEMPTS} attempts, none reusable`)
}
