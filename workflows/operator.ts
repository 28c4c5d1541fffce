// Deterministic: runs in the workflow sandbox. The operator's handles on a run (docs/design.md §10.3): signals
// `pause`, `resume` and `abort` (no answer: a pause of a paused run does nothing), updates `setHyperparameters`
// and `retryIteration` (validated before they are accepted, so a bad override is rejected to the caller with
// every field path and never enters the history), query `status`. The parent forwards pause, resume, abort and
// accepted changes (`setRun`: the RunRef of the changed configuration) to the running iteration child.
import { ActivityFailure, ApplicationFailure, ChildWorkflowFailure } from '@temporalio/common'
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow'
import type {
  AnnotationCounts,
  EvaluationTarget,
  HyperparameterChange,
  RunRef,
  StoreRef,
} from '../records/contracts.ts'

export const pauseSignal = defineSignal('pause')
export const resumeSignal = defineSignal('resume')
/**
 * Ends the run after its running phase; `now` cancels the running phase instead (`seedflow abort` sends it when
 * that phase is retrying after failures, or with --now). Finished shards stay finished either way.
 */
export const abortSignal = defineSignal<[AbortRequest?]>('abort')

export interface AbortRequest {
  reason?: string
  /** Cancel the running phase (its activities, the iteration child) instead of letting it finish. */
  now?: boolean
}
/** Parent → child: the run's configuration changed; the next phases use this RunRef. */
export const setRunSignal = defineSignal<[RunRef]>('setRun')

/** Hyperparameter overrides, e.g. `{ stage2: { lr: 1e-4 } }` (seed/hyperparameters.ts); answers the change. */
export const setHyperparametersUpdate = defineUpdate<HyperparameterChange, [unknown]>('setHyperparameters')

export interface RetryRequest {
  /** Hyperparameter overrides applied before the iteration runs again. */
  overrides?: unknown
}

export interface RetryAccepted {
  iteration: number
  /** The configuration hash the retried iteration's phases run under. */
  configSha256: string
  change: HyperparameterChange | null
}

/** Runs the failed iteration again (a run awaiting an operator only), optionally with overrides. */
export const retryIterationUpdate = defineUpdate<RetryAccepted, [RetryRequest]>('retryIteration')

/** Why a run waits for an operator. */
export interface OperatorWait {
  /** The failure's type: IntegrityError, NonFiniteLossError, InvalidRunConfig, … */
  type: string
  message: string
  /** The iteration (−1 before Stage 2) and the phase (the failed activity) where it failed. */
  iteration: number
  phase: string
  /** Workflow time it started waiting (ISO 8601). */
  since: string
}

/** What the iteration child's `status` query answers. */
export interface IterationStatus {
  iteration: number
  /** The phase running, or the next one while held. */
  phase: string
  paused: boolean
  /** True while the child waits between phases (paused). */
  held: boolean
  configSha256: string
}

export const iterationStatusQuery = defineQuery<IterationStatus>('status')

export interface Evaluation {
  label: string
  /** The iteration the checkpoint ends; −1 for the base and Stage 1 (`target` says which). */
  iteration: number
  /** What was evaluated (absent in runs from before typed targets: read `label`). */
  target?: EvaluationTarget
  /** The split of an evaluation of `evaluation.splits`; absent: the periodic one (`evaluation.split`). */
  split?: string
  /** The micro average: success over all evaluated tasks. */
  success: number
  /** Standard error of `success` over the evaluated tasks. */
  standardError: number
  /** The macro average: the mean of the per-family success rates (absent in runs from before it was recorded). */
  macroSuccess?: number
  tasks: number
  /** The sha256 of the evaluated checkpoint's model file (absent in runs from before it was recorded). */
  checkpointSha256?: string
  manifestKey: string
}

/** What the `status` query answers: where the run is, its evaluations so far, and what the operator did. */
export interface RunStatus {
  runId: string
  /** prepare, annotate, stage1, iteration, evaluate, awaiting-operator, done or aborted. */
  phase: string
  /** The iteration running (or next), and how many the run has. */
  iteration: number
  iterations: number
  algorithm: string | null
  evaluations: Evaluation[]
  /** Paused by the operator: no new phase starts until `resume`. */
  paused: boolean
  /** True while the run itself waits at a phase boundary because it is paused (the iteration child has its own). */
  held: boolean
  /** While held: the phase that starts on resume (absent in runs from before it was recorded). */
  next?: string | null
  /** Why the run waits for an operator (`retryIteration` or `abort`); null when it does not. */
  awaitingOperator: OperatorWait | null
  /** Accepted hyperparameter changes, oldest first. */
  hyperparameters: HyperparameterChange[]
  /** The configuration hash the next phases run under (null before the run is planned). */
  configSha256: string | null
  /** Why the run was aborted, once the operator asked (it ends after the running phase, or cancels it). */
  aborted: string | null
  /** The store the run lives in, once planned (absent in runs planned before it was recorded). */
  store?: StoreRef
  /** How Stage 1's annotation went, once it ran (absent before, and in runs from before it was recorded). */
  annotation?: AnnotationCounts
}

/** The run's own part of its status (seedRun and RunOperator write it); the gate's pause and abort state completes it. */
export type RunProgress = Omit<RunStatus, 'paused' | 'held' | 'next' | 'aborted' | 'store'>

export const statusQuery = defineQuery<RunStatus>('status')

/** Thrown inside a workflow to end it as aborted (never leaves the workflow). */
export class RunAborted extends Error {
  override name = 'RunAborted'
}

/** The failure type of an iteration the operator aborted (the parent recognizes it and ends cleanly). */
export const ABORTED_TYPE = 'RunAborted'

/**
 * What failed, from a child or activity failure: the first application failure's type and message (what the
 * activity threw; its own causes are details) and the activity (phase) it came from.
 */
export function describeFailure(error: unknown, iteration: number, since: string): OperatorWait {
  let type = error instanceof Error ? error.name : 'Error'
  let message = error instanceof Error ? error.message : String(error)
  let phase = 'iteration'
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    if (e instanceof ActivityFailure) phase = e.activityType
    if (e instanceof ApplicationFailure) {
      type = e.type ?? type
      message = e.message
      break
    }
    if (!(e instanceof ActivityFailure || e instanceof ChildWorkflowFailure)) {
      type = e.name
      message = e.message
    }
  }
  return { type, message, iteration, phase, since }
}

/** Problems as a rejection the caller reads: one `path: reason` per line. */
export function rejection(what: string, problems: readonly string[]): ApplicationFailure {
  return ApplicationFailure.nonRetryable(`${what}:\n${problems.join('\n')}`, 'InvalidHyperparameters')
}
