// The one routing function (docs/design.md §10.1): a run's queues derive from the queue its workflow runs on. The
// shared queue gives exactly the queues every committed history used (replay does not compare task queues, so
// this test is what holds the routing of running workflows unchanged), a run's own queue gives queues of its own.
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { describe, it } from 'node:test'
import type { PipelineActivities } from '../../records/contracts.ts'
import { workerTaskQueues } from '../../workers/local.ts'
import {
  runOfTaskQueue,
  runTaskQueue,
  TASK_QUEUES,
  type TaskQueueName,
  taskQueuesOf,
} from '../../workers/task-queues.ts'
import { historyFixture } from '../workflows/history-fixtures.ts'

/** Which queue each activity goes to (workflows/activity-proxies.ts): control, rollout or train. */
const ROLE: Record<keyof PipelineActivities, TaskQueueName> = {
  planRun: 'control',
  recordHyperparameters: 'control',
  recordIteration: 'control',
  verifyRun: 'control',
  prepare: 'train',
  fork: 'train',
  stage1: 'train',
  snapshot: 'train',
  rescore: 'train',
  update: 'train',
  annotate: 'rollout',
  rollout: 'rollout',
  analyze: 'rollout',
  evaluate: 'rollout',
}

const HISTORIES = ['seed-run-grpo', 'seed-iteration-grpo', 'seed-run-skill-grpo', 'seed-run-fork', 'seed-run-fork-once']

interface HistoryEvent {
  eventType: string
  workflowExecutionStartedEventAttributes?: { taskQueue: { name: string } }
  activityTaskScheduledEventAttributes?: { activityType: { name: string }; taskQueue: { name: string } }
  startChildWorkflowExecutionInitiatedEventAttributes?: { taskQueue: { name: string } }
}

describe('task queues of a run', () => {
  it('the shared queue gives the shared queues', () => {
    assert.deepEqual(taskQueuesOf(TASK_QUEUES.control), { ...TASK_QUEUES })
    assert.equal(runOfTaskQueue(TASK_QUEUES.control), undefined)
  })

  it("a run's own queue gives rollout and train queues of that run alone", () => {
    assert.equal(runTaskQueue('run-20261204-101500'), 'seedflow@run-20261204-101500')
    assert.deepEqual(taskQueuesOf(runTaskQueue('my.run-1')), {
      control: 'seedflow@my.run-1',
      rollout: 'seedflow-rollout@my.run-1',
      train: 'seedflow-train@my.run-1',
    })
    assert.equal(runOfTaskQueue(runTaskQueue('my.run-1')), 'my.run-1')
  })

  it('a worker for a run polls that run’s queues, a plain worker the shared ones', () => {
    assert.deepEqual(workerTaskQueues('r1'), taskQueuesOf('seedflow@r1'))
    assert.deepEqual(workerTaskQueues(), { ...TASK_QUEUES })
  })

  for (const name of HISTORIES) {
    it(`routes every activity and child of the committed history ${name} as it was recorded`, async () => {
      const { events } = JSON.parse(await readFile(historyFixture(name), 'utf8')) as { events: HistoryEvent[] }
      const started = events[0]?.workflowExecutionStartedEventAttributes
      assert.ok(started, `${name} starts with its WorkflowExecutionStarted event`)
      const queues = taskQueuesOf(started.taskQueue.name)
      let scheduled = 0
      for (const e of events) {
        const activity = e.activityTaskScheduledEventAttributes
        if (activity) {
          const role = ROLE[activity.activityType.name as keyof PipelineActivities]
          assert.ok(role, `unknown activity ${activity.activityType.name}`)
          assert.equal(activity.taskQueue.name, queues[role], `${activity.activityType.name} in ${name}`)
          scheduled++
        }
        const child = e.startChildWorkflowExecutionInitiatedEventAttributes
        if (child) assert.equal(child.taskQueue.name, queues.control, `the iteration child of ${name}`)
      }
      assert.ok(scheduled > 3, `${name} schedules activities`)
    })
  }
})
