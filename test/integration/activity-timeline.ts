// A run's activities as its history tells them, one line each (seconds from the run's start, type, task queue,
// attempt, how it ended), its child workflows' (the iterations) in place: what a test prints when a run does not
// finish in time, to say where the time went.
import type { WorkflowHandle } from '@temporalio/client'

export async function activityTimeline(handle: WorkflowHandle, origin?: number): Promise<string> {
  const { events } = await handle.fetchHistory()
  const list = events ?? []
  const seconds = (t: unknown) => {
    const ts = t as { seconds?: { toNumber?: () => number } | number; nanos?: number } | null | undefined
    const s = typeof ts?.seconds === 'number' ? ts.seconds : (ts?.seconds?.toNumber?.() ?? 0)
    return s + (ts?.nanos ?? 0) / 1e9
  }
  const start = origin ?? seconds(list[0]?.eventTime)
  const at = (t: unknown) => `${(seconds(t) - start).toFixed(1).padStart(6)} s`
  const scheduled = new Map<string, string>()
  const lines: string[] = []
  for (const e of list) {
    const child = e.childWorkflowExecutionStartedEventAttributes?.workflowExecution?.workflowId
    if (child)
      lines.push(`${at(e.eventTime)} child ${child}`, await activityTimeline(handle.client.getHandle(child), start))
    const id = String(e.eventId)
    const s = e.activityTaskScheduledEventAttributes
    if (s) {
      scheduled.set(id, `${s.activityType?.name} on ${s.taskQueue?.name}`)
      lines.push(`${at(e.eventTime)} scheduled ${scheduled.get(id)}`)
    }
    const started = e.activityTaskStartedEventAttributes
    if (started)
      lines.push(
        `${at(e.eventTime)} started   ${scheduled.get(String(started.scheduledEventId))} (attempt ${started.attempt})`,
      )
    const ended =
      (e.activityTaskCompletedEventAttributes && ['completed', e.activityTaskCompletedEventAttributes]) ||
      (e.activityTaskFailedEventAttributes && ['failed', e.activityTaskFailedEventAttributes]) ||
      (e.activityTaskTimedOutEventAttributes && ['timed out', e.activityTaskTimedOutEventAttributes]) ||
      (e.activityTaskCanceledEventAttributes && ['cancelled', e.activityTaskCanceledEventAttributes])
    if (ended) {
      const [how, attrs] = ended as [
        string,
        { scheduledEventId?: unknown; failure?: { message?: string | null } | null },
      ]
      const why = attrs.failure?.message ? `: ${attrs.failure.message.slice(0, 160)}` : ''
      lines.push(`${at(e.eventTime)} ${how.padEnd(9)} ${scheduled.get(String(attrs.scheduledEventId))}${why}`)
    }
  }
  return lines.join('\n')
}
