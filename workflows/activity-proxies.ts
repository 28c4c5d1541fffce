// Deterministic: runs in the workflow sandbox. One proxy per task queue (docs/design.md §10.1), each queue derived
// from the one the workflow runs on (workers/task-queues.ts): a run on its own queues keeps all its work there.
import { proxyActivities, workflowInfo } from '@temporalio/workflow'
import type { PipelineActivities } from '../activities/contracts.ts'
import { NON_RETRYABLE_TYPES } from '../activities/failures.ts'
import { taskQueuesOf } from '../workers/task-queues.ts'

/** The failures of the one fatal-error table (activities/failures.ts) fail at once; the rest retries with backoff. */
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

/**
 * The model-bound queues for a run: heartbeat timeout from the plan (RunPlan.heartbeatTimeoutSeconds). A short
 * timeout retries the activity of a dead worker sooner; too short for the worker's longest pause between
 * heartbeats (the activities heartbeat four times per timeout, from the event loop) and a live, busy worker's
 * attempt times out and is retried, which the phase wrapper then answers from the finished manifest.
 */
export function modelQueues(plan: { heartbeatTimeoutSeconds?: number }) {
  const heartbeatTimeout = plan.heartbeatTimeoutSeconds
    ? `${plan.heartbeatTimeoutSeconds} seconds`
    : DEFAULT_HEARTBEAT_TIMEOUT
  const queues = taskQueuesOf(workflowInfo().taskQueue)
  return {
    rolloutQueue: proxyActivities<PipelineActivities>({
      taskQueue: queues.rollout,
      startToCloseTimeout: '2 hours',
      heartbeatTimeout,
      retry,
    }),
    trainQueue: proxyActivities<PipelineActivities>({
      taskQueue: queues.train,
      startToCloseTimeout: '4 hours',
      heartbeatTimeout,
      retry,
    }),
  }
}
