// Deterministic: runs in the workflow sandbox. One proxy per task queue (DESIGN.md section 3).
import { proxyActivities } from '@temporalio/workflow'
import type { PipelineActivities } from '../activities/pipeline-types.ts'
import { TASK_QUEUES } from '../workers/task-queues.ts'

/** Bad configuration, corrupt artifacts and non-finite losses fail at once; the rest retries with backoff. */
const retry = {
  maximumAttempts: 3,
  initialInterval: '2 seconds',
  backoffCoefficient: 4,
  nonRetryableErrorTypes: [
    'InvalidRunConfig',
    'IntegrityError',
    'CheckpointError',
    'NonFiniteLossError',
    'InvalidKeyError',
  ],
}

export const control = proxyActivities<PipelineActivities>({
  taskQueue: TASK_QUEUES.control,
  startToCloseTimeout: '5 minutes',
  retry,
})

export const rolloutQueue = proxyActivities<PipelineActivities>({
  taskQueue: TASK_QUEUES.rollout,
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '5 minutes',
  retry,
})

export const trainQueue = proxyActivities<PipelineActivities>({
  taskQueue: TASK_QUEUES.train,
  startToCloseTimeout: '4 hours',
  heartbeatTimeout: '5 minutes',
  retry,
})
