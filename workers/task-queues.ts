/** Task queues of docs/design.md §10.1. */
export const TASK_QUEUES = {
  control: 'seedflow',
  rollout: 'seedflow-rollout',
  train: 'seedflow-train',
} as const

export type TaskQueueName = keyof typeof TASK_QUEUES
