// Deterministic: runs in the workflow sandbox. One Stage 2 iteration, read top to bottom like the paper.
import { ApplicationFailure, log, patched, setHandler } from '@temporalio/workflow'
import type { ArtifactRef, CheckpointRef, PhaseSummary, RunPlan, RunRef } from '../records/contracts.ts'
import { ALGORITHMS } from '../seed/algorithms.ts'
import { control, FORGET_GONE_RESIDENT, MODEL_AFFINITY, modelQueues, onResidentWorker } from './activity-proxies.ts'
import { ABORTED_TYPE, type IterationStatus, iterationStatusQuery, setRunSignal } from './operator.ts'
import { OperatorGate } from './operator-gate.ts'
import { enterPhase } from './phase-boundary.ts'

export interface IterationInput {
  run: RunRef
  plan: RunPlan
  iteration: number
  acting: CheckpointRef
  reference: CheckpointRef
  analyzer: CheckpointRef | null
  /** Start held (the run was paused when the iteration started); absent: not paused. */
  paused?: boolean
  /** The queue of the train worker that keeps `acting` loaded (the last update's); absent: none known. */
  residentQueue?: string
}

export interface IterationResult {
  checkpoint: CheckpointRef
  /** The iteration's metrics as metrics.json holds them, namespaced `phase/name` (those that apply). */
  stats: Record<string, number>
  metrics: ArtifactRef
  /** manifest.json: every artifact of the iteration, written last. */
  manifest: ArtifactRef
  /** The queue of the train worker that keeps `checkpoint` loaded (model-affinity); absent in older runs. */
  residentQueue?: string
}

/** A named output of a phase; its absence breaks the contract between workflow and activities. */
function output(summary: PhaseSummary, name: string, what: string): ArtifactRef {
  const ref = summary.outputs[name]
  if (!ref)
    throw ApplicationFailure.nonRetryable(
      `${what} returned no '${name}' output (${summary.manifestKey})`,
      'PhaseContractError',
    )
  return ref
}

/** The metrics an operator scans first, in one log line; `-` where one does not apply to the row. */
const SUMMARY: ReadonlyArray<readonly [string, string, number]> = [
  ['success', 'rollout/success_rate', 2],
  ['parse', 'analyze/parse_rate', 2],
  ['gate', 'update/opd_gate_mean', 3],
  ['gap+', 'update/opd_positive_gap_share', 2],
  ['truncated rollout', 'rollout/prompts_truncated', 0],
  ['analyze', 'analyze/prompts_truncated', 0],
  ['teacher', 'rescore/teacher_prompts_truncated', 0],
  ['loss', 'update/loss', 4],
  ['kl', 'update/kl', 4],
  ['grad', 'update/grad_norm', 3],
]

function summaryLine(iteration: number, stats: Record<string, number>): string {
  const parts = SUMMARY.map(([label, name, digits]) => {
    const v = stats[name]
    return `${label} ${v === undefined ? '-' : v.toFixed(digits)}`
  })
  return `iteration ${iteration}: ${parts.join(', ')}`
}

/**
 * The operator's hold on an iteration: pause and resume (the next phase waits), abort (the next phase does not
 * start), a changed configuration (the next phases run under its RunRef), and the status query.
 */
function operatorHold(it: IterationInput) {
  let run = it.run
  let phaseName = 'snapshot'
  const gate = new OperatorGate(it.paused ?? false, {
    abortAt: (_reason, next) =>
      ApplicationFailure.nonRetryable(`iteration ${it.iteration} aborted by the operator before ${next}`, ABORTED_TYPE),
  }).install()
  setHandler(
    iterationStatusQuery,
    (): IterationStatus => ({
      iteration: it.iteration,
      phase: gate.next ?? phaseName,
      paused: gate.paused,
      held: gate.held,
      configSha256: run.configSha256,
    }),
  )
  setHandler(setRunSignal, (next) => {
    run = next
  })
  return {
    /**
     * Between phases: waits while paused, stops when aborted, then shows `name` as the running phase (SeedPhase,
     * SeedIteration, the status query); returns the RunRef the phase runs under.
     */
    async next(name: string): Promise<RunRef> {
      await enterPhase(gate, name, {
        seedPhase: name,
        iteration: it.iteration,
        status: () => {
          phaseName = name
        },
      })
      return run
    },
  }
}

export async function seedIteration(it: IterationInput): Promise<IterationResult> {
  const row = ALGORITHMS[it.plan.algorithm]
  const { iteration } = it
  const { rolloutQueue, trainQueue } = modelQueues(it.plan)
  // model-bound phases go to the train worker that keeps the policy loaded (snapshot → rescore → update → the
  // next iteration's snapshot), falling back to the run's train queue; histories from before keep the train queue
  const affinity = patched(MODEL_AFFINITY)
  let resident = affinity ? it.residentQueue : undefined
  // a resident worker that took no phase in time is gone (or stuck): the later phases go to the train queue at once
  const forget = () => {
    if (patched(FORGET_GONE_RESIDENT)) resident = undefined
  }
  const onTrain = <T>(call: (queue: typeof trainQueue) => Promise<T>): Promise<T> =>
    affinity ? onResidentWorker(it.plan, resident, call, forget) : call(trainQueue)
  const hold = operatorHold(it)
  let run = await hold.next('snapshot')
  const snapshot = await onTrain((q) =>
    q.snapshot({ run, iteration, acting: it.acting, reference: it.reference, analyzer: it.analyzer }),
  )
  run = await hold.next('rollout')
  const shards = Array.from({ length: it.plan.shards }, (_, shard) => shard)
  const rollouts = await Promise.all(shards.map((shard) => rolloutQueue.rollout({ run, iteration, shard, snapshot })))
  const rolloutRefs = rollouts.map((r, shard) => output(r, 'rollouts', `rollout shard ${shard}`))
  let skills: PhaseSummary[] = []
  if ((row.phases as readonly string[]).includes('analyze')) {
    run = await hold.next('analyze')
    skills = await Promise.all(
      shards.map((shard) =>
        rolloutQueue.analyze({ run, iteration, shard, snapshot, rollouts: rolloutRefs[shard] as ArtifactRef }),
      ),
    )
  }
  run = await hold.next('rescore')
  const skillRefs = skills.map((s, shard) => output(s, 'skills', `analyze shard ${shard}`))
  const scored = await onTrain((q) => q.rescore({ run, iteration, snapshot, rollouts: rolloutRefs, skills: skillRefs }))
  resident = scored.residentQueue ?? resident
  run = await hold.next('update')
  const rescored = output(scored, 'rescore', 'rescore')
  const next = await onTrain((q) => q.update({ run, iteration, snapshot, rollouts: rolloutRefs, rescore: rescored }))
  run = await hold.next('metrics')
  const recorded = await control.recordIteration({
    run,
    iteration,
    algorithm: it.plan.algorithm,
    snapshot,
    manifests: {
      rollout: rollouts.map((s) => s.manifestKey),
      analyze: skills.map((s) => s.manifestKey),
      rescore: [scored.manifestKey],
      update: [next.manifestKey],
    },
  })
  log.info(summaryLine(iteration, recorded.stats), { iteration, ...recorded.stats })
  return {
    checkpoint: next.checkpoint,
    stats: recorded.stats,
    metrics: output(recorded, 'metrics', 'recordIteration'),
    manifest: recorded.manifest,
    ...(affinity && next.residentQueue ? { residentQueue: next.residentQueue } : {}),
  }
}
