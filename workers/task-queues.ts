// Deterministic: the workflow bundle reads this module (workflows/activity-proxies.ts). The task queues of
// docs/design.md §10.1, derived from the one queue a run's workflow runs on.

/** The shared queues: runs started with `temporal workflow start`, served by a plain `seedflow worker`. */
export const TASK_QUEUES = {
  control: 'seedflow',
  rollout: 'seedflow-rollout',
  train: 'seedflow-train',
} as const

export type TaskQueueName = keyof typeof TASK_QUEUES

export type TaskQueues = Record<TaskQueueName, string>

/** Separates a queue's name from the run it is scoped to (run ids never hold it: store/keys.ts RUN_ID_PATTERN). */
const SCOPE = '@'

/** The workflow task queue of a run that has queues of its own (`seedflow run`, `seedflow worker --run <id>`). */
export function runTaskQueue(runId: string): string {
  return `${TASK_QUEUES.control}${SCOPE}${runId}`
}

/**
 * The queues of a run whose workflow runs on `workflowQueue`, the only input of the routing: control activities
 * on the workflow's own queue, the model-bound ones on `<name>-rollout` and `<name>-train` with the same scope.
 * `seedflow` gives TASK_QUEUES (what every committed history used); `seedflow@<runId>` gives
 * `seedflow-rollout@<runId>` and `seedflow-train@<runId>`.
 */
export function taskQueuesOf(workflowQueue: string): TaskQueues {
  const at = workflowQueue.indexOf(SCOPE)
  const name = at < 0 ? workflowQueue : workflowQueue.slice(0, at)
  const scope = at < 0 ? '' : workflowQueue.slice(at)
  return { control: workflowQueue, rollout: `${name}-rollout${scope}`, train: `${name}-train${scope}` }
}

/** Separates a train queue from the one worker that polls it (run ids and queue names never hold it). */
const WORKER = '#'

/**
 * The queue that only worker `workerId` polls beside `trainQueue` (Temporal's worker-specific task queue):
 * model-bound phases sent there find the policies that worker keeps loaded (docs/design.md §10.1).
 */
export function residentQueueOf(trainQueue: string, workerId: string): string {
  return `${trainQueue}${WORKER}${workerId}`
}

/** The run a workflow queue is scoped to, or undefined for a shared one. */
export function runOfTaskQueue(workflowQueue: string): string | undefined {
  const at = workflowQueue.indexOf(SCOPE)
  return at < 0 ? undefined : workflowQueue.slice(at + SCOPE.length)
}
