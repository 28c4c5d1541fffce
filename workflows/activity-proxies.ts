// Deterministic: runs in the workflow sandbox. One proxy per task queue (docs/design.md §10.1), each queue derived
// from the one the workflow runs on (workers/task-queues.ts): a run on its own queues keeps all its work there.
import { ActivityFailure, proxyActivities, TimeoutFailure, workflowInfo } from '@temporalio/workflow'
import type { PipelineActivities } from '../records/contracts.ts'
import { NON_RETRYABLE_TYPES } from '../records/failures.ts'
import { taskQueuesOf } from '../workers/task-queues.ts'

/** The failures of the one fatal-error table (records/failures.ts) fail at once; the rest retries with backoff. */
const retry = {
  maximumAttempts: 3,
  initialInterval: '2 seconds',
  backoffCoefficient: 4,
  nonRetryableErrorTypes: [...NON_RETRYABLE_TYPES],
}

/** No taskQueue: the SDK schedules on the workflow's own queue, taskQueuesOf(queue).control. */
export const control = proxyActivities<PipelineActivities>({
  startToCloseTimeout: '5 minutes',
  retry,
})

/** The heartbeat timeout of model-bound activities when the run plan sets none. */
const DEFAULT_HEARTBEAT_TIMEOUT = '5 minutes'

/** The patch under which model-bound phases go to the worker that keeps their policy (docs/design.md §10.1). */
export const MODEL_AFFINITY = 'model-affinity'

/**
 * The patch under which a resident worker that took no phase within the wait is forgotten for the rest of the
 * iteration: before, a snapshot that fell back to the train queue left the rescore waiting on the gone worker too.
 */
export const FORGET_GONE_RESIDENT = 'forget-gone-resident'

/** The longest a phase waits on a worker's own queue before it goes to the run's train queue (seconds). */
const RESIDENT_WAIT_SECONDS = 60

type Proxies = ReturnType<typeof proxyActivities<PipelineActivities>>

/**
 * Runs `call` on the queue only one train worker polls (`resident`, from an earlier phase's result), where that
 * worker keeps the policy loaded; when no worker takes it there within the heartbeat timeout (at most a minute:
 * that worker is gone, or busy), on the run's train queue, where any worker loads the checkpoint from the store,
 * and `gone()` is told. Without `resident`, on the train queue at once.
 */
export async function onResidentWorker<T>(
  plan: { heartbeatTimeoutSeconds?: number },
  resident: string | undefined,
  call: (queue: Proxies) => Promise<T>,
  gone: () => void = () => {},
): Promise<T> {
  const { trainQueue } = modelQueues(plan)
  if (!resident) return call(trainQueue)
  const wait = Math.min(plan.heartbeatTimeoutSeconds ?? RESIDENT_WAIT_SECONDS, RESIDENT_WAIT_SECONDS)
  const own = proxyActivities<PipelineActivities>({
    ...modelOptions(plan),
    taskQueue: resident,
    startToCloseTimeout: '4 hours',
    scheduleToStartTimeout: `${wait} seconds`,
  })
  try {
    return await call(own)
  } catch (error) {
    const unstarted =
      error instanceof ActivityFailure &&
      error.cause instanceof TimeoutFailure &&
      error.cause.timeoutType === 'SCHEDULE_TO_START'
    if (!unstarted) throw error
    gone()
    return call(trainQueue)
  }
}

function modelOptions(plan: { heartbeatTimeoutSeconds?: number }) {
  const heartbeatTimeout = plan.heartbeatTimeoutSeconds
    ? `${plan.heartbeatTimeoutSeconds} seconds`
    : DEFAULT_HEARTBEAT_TIMEOUT
  return { heartbeatTimeout, retry }
}

/**
 * The model-bound queues for a run: heartbeat timeout from the plan (RunPlan.heartbeatTimeoutSeconds). A short
 * timeout retries the activity of a dead worker sooner; too short for the worker's longest pause between
 * heartbeats (the activities heartbeat four times per timeout, from the event loop) and a live, busy worker's
 * attempt times out and is retried, which the phase wrapper then answers from the finished manifest.
 */
export function modelQueues(plan: { heartbeatTimeoutSeconds?: number }) {
  const queues = taskQueuesOf(workflowInfo().taskQueue)
  return {
    rolloutQueue: proxyActivities<PipelineActivities>({
      ...modelOptions(plan),
      taskQueue: queues.rollout,
      startToCloseTimeout: '2 hours',
    }),
    trainQueue: proxyActivities<PipelineActivities>({
      ...modelOptions(plan),
      taskQueue: queues.train,
      startToCloseTimeout: '4 hours',
    }),
  }
}
