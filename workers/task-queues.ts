/** Task queues of DESIGN.md section 3. */
export const TASK_QUEUES = {
  control: 'seedflow',
  rollout: 'seedflow-rollout',
  train: 'seedflow-train',
} as const

export type TaskQueueName = keyof typeof TASK_QUEUES
