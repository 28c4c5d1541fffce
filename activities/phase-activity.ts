// The one shell every phase activity runs in, as the op table owns the backward walk: a phase module
// (activities/phases/) declares where its shard lives, what of the configuration it needs, what it reads (the
// manifest's input hashes) and its compute function; the shell looks up the run's effective configuration
// once, heartbeats, checks for a finished manifest (activities/phase.ts), runs the body with its policies
// released afterwards, classifies what it throws (records/failures.ts) and returns the summary.
import { CancelledFailure, Context } from '@temporalio/activity'
import type { Engine } from '../engine/index.ts'
import type { PhaseProgress, PhaseSummary, RunRef } from '../records/contracts.ts'
import { classifyFailure, fatal } from '../records/failures.ts'
import { runConfigOf } from '../records/hyperparameters.ts'
import type { PhaseScope } from '../records/phase-manifest.ts'
import type { RunConfig } from '../seed/config.ts'
import { parseRunConfig } from '../seed/config.ts'
import type { HyperparameterOverrides } from '../seed/hyperparameters.ts'
import type { ArtifactStore, ObjectInfo } from '../store/artifact-store.ts'
import {
  type PhaseContext,
  type PhaseCounters,
  type PhaseDeps,
  type PhaseHooks,
  type PhaseResult,
  runPhase,
} from './phase.ts'
import { artifactRef, type PhaseReaders, phaseReaders, type Residency, withPolicyScope } from './phase-io.ts'
import { ResidentPolicies } from './resident-policies.ts'

/** The last progress details each running activity reported; every later heartbeat repeats them. */
const progressOf = new WeakMap<Context, PhaseProgress>()

/**
 * Heartbeats when running as an activity (no-op in plain calls, e.g. unit tests), and stops the phase once the
 * activity is cancelled: its run aborted with `--now` or closed, its attempt timed out, or its worker shutting
 * down (Ctrl-C, SIGTERM). The phases call this between steps, so it throws the activity's CancelledFailure there
 * and the loop ends, instead of computing to the end a result that nobody will read (a warm-start: an hour).
 */
export function heartbeat(progress?: PhaseProgress): void {
  const context = activityContext()
  if (!context) return
  beat(context, progress)
  const signal = context.cancellationSignal
  if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new CancelledFailure(String(signal.reason))
}

/** One heartbeat with the last progress details; never throws (the timer's beat between a phase's own). */
function beat(context: Context, progress?: PhaseProgress): void {
  if (progress) progressOf.set(context, progress)
  context.heartbeat(progressOf.get(context))
}

function activityContext(): Context | undefined {
  try {
    return Context.current()
  } catch {
    return undefined
  }
}

/** Every 10 s, or four times per heartbeat timeout when that is shorter (a short timeout must still be met). */
function heartbeatInterval(context: Context): number {
  const timeout = context.info.heartbeatTimeoutMs
  return timeout ? Math.max(100, Math.min(10_000, Math.floor(timeout / 4))) : 10_000
}

/**
 * Runs an activity body: heartbeats from the event loop while it runs, releases the policies it loaded, and
 * turns deterministic failures into non-retryable ApplicationFailures named by type.
 */
export async function guarded<T>(what: string, body: () => Promise<T>): Promise<T> {
  const context = activityContext()
  const timer = context ? setInterval(() => beat(context), heartbeatInterval(context)) : undefined
  try {
    return await withPolicyScope(body)
  } catch (error) {
    throw classifyFailure(what, error)
  } finally {
    if (timer) clearInterval(timer)
  }
}

export function summaryOf<S extends Record<string, number>>(result: PhaseResult<S>): PhaseSummary {
  return {
    manifestKey: result.manifestKey,
    reused: result.reused,
    outputs: Object.fromEntries(Object.entries(result.outputs).map(([name, info]) => [name, artifactRef(info)])),
    stats: result.stats,
  }
}

/** What a phase body works with: the store, the engine, the readers and the attempt's context. */
export interface PhaseIo extends PhaseContext {
  store: ArtifactStore
  engine: Engine
  read: PhaseReaders
}

/** One phase shard, planned: where it lives, what it read, and how to compute it when no manifest matches. */
export interface PlannedPhase {
  scope: PhaseScope
  inputs: Record<string, string>
  compute(io: PhaseIo): Promise<{ outputs: Record<string, ObjectInfo>; stats: Record<string, number> }>
}

/** A phase, declared: the shell does everything else. */
export interface PhaseDef<I extends { run: RunRef }, N, R = PhaseSummary> {
  /** How failures name the activity (`rollout shard 2`). */
  describe(input: I): string
  /** The part of the configuration the phase reads, resolved once per activity. */
  needs(config: RunConfig, input: I): N
  /** Where its shard lives and what it reads; may read the store (the inputs are hashes of what it reads). */
  plan(input: I, needs: N, read: PhaseReaders): Promise<PlannedPhase>
  /** The activity's result (default: the summary). */
  result?(summary: PhaseSummary, outputs: Record<string, ObjectInfo>): R
}

/** The effective configuration a RunRef names, parsed once per worker and run state. */
export function configResolver(store: ArtifactStore) {
  const configs = new Map<string, { config: RunConfig; overrides: HyperparameterOverrides | null }>()
  return async (run: RunRef) => {
    const id = `${run.runId}/${run.configSha256}`
    const cached = configs.get(id)
    if (cached) return cached
    const { config, overrides } = await runConfigOf(store, run)
    const parsed = parseRunConfig(config)
    if (!parsed.ok) throw fatal(`run ${run.runId}: ${parsed.problems.join('; ')}`, 'InvalidRunConfig')
    const entry = { config: parsed.config, overrides }
    configs.set(id, entry)
    return entry
  }
}

export interface PhaseShellDeps {
  store: ArtifactStore
  engine: Engine
  counters?: PhaseCounters
  phaseHooks?: PhaseHooks
  /** Policies kept loaded between this worker's activities (default: a cache of two). */
  resident?: ResidentPolicies
  /** The queue only this worker polls, told in every phase's summary (`PhaseSummary.residentQueue`). */
  residentQueue?: string
}

/** The shell over one store and engine: `activity(def)` is the Temporal activity of a declared phase. */
export function phaseShell(deps: PhaseShellDeps) {
  const { store, engine } = deps
  const policies = deps.resident ?? new ResidentPolicies()
  let storeId: Promise<string> | undefined
  const residency: Residency = {
    policies,
    storeId: () => {
      storeId ??= store.identity().then((i) => i.id)
      return storeId
    },
  }
  const read = phaseReaders(store, engine)
  const effective = configResolver(store)
  const phaseDeps: PhaseDeps = {
    store,
    ...(deps.counters ? { counters: deps.counters } : {}),
    ...(deps.phaseHooks ? { hooks: deps.phaseHooks } : {}),
  }
  return {
    read,
    effective,
    resident: policies,
    /** What runPhase needs besides the phase (the `metrics` phase of recordIteration uses it too). */
    phaseDeps,
    activity<I extends { run: RunRef }, N, R = PhaseSummary>(def: PhaseDef<I, N, R>): (input: I) => Promise<R> {
      return (input) =>
        guarded(def.describe(input), async () => {
          const { config, overrides } = await effective(input.run)
          const read = phaseReaders(store, engine, config.engine, residency)
          const planned = await def.plan(input, def.needs(config, input), read)
          const spec = {
            configSha256: input.run.configSha256,
            inputs: planned.inputs,
            ...(overrides ? { hyperparameters: overrides } : {}),
          }
          const result = await runPhase(phaseDeps, planned.scope, spec, (ctx) =>
            planned.compute({ ...ctx, store, engine, read }),
          )
          const summary: PhaseSummary = {
            ...summaryOf(result),
            ...(deps.residentQueue ? { residentQueue: deps.residentQueue } : {}),
          }
          return def.result ? def.result(summary, result.outputs) : (summary as R)
        })
    },
  }
}

/** The scope of a phase shard of run `run` (iteration omitted: a run-level phase). */
export function scopeOf(run: RunRef, phase: PhaseScope['phase'], shard: number, iteration?: number): PhaseScope {
  return { runId: run.runId, phase, shard, ...(iteration === undefined ? {} : { iteration }) }
}
