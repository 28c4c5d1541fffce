// What orchestration costs a run: for each of its iteration workflows (`<run>/iter-<k>`), the wall time from the
// child's start to its close, against the time some activity of it was executing (the union of the intervals
// from each ActivityTaskStarted to its completion), read from the workflow histories the server keeps. The rest
// is Temporal's: scheduling, task dispatch, history writes, the workflow's own tasks.
import type { Client } from '@temporalio/client'

export interface OrchestrationShare {
  iterations: number
  wallSeconds: number
  computeSeconds: number
  orchestrationSeconds: number
  /** orchestration / wall over all iterations. */
  share: number
  medianShare: number
  perIteration: Array<{ iteration: number; wallSeconds: number; computeSeconds: number }>
}

type Event = NonNullable<
  Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['fetchHistory']>>['events']
>[number]

/** An event's time in ms (a protobuf Timestamp: seconds, maybe a Long, and nanos). */
const ms = (e: Event) => Number(e.eventTime?.seconds ?? 0) * 1000 + (e.eventTime?.nanos ?? 0) / 1e6

/** The length of the union of [start, end) intervals. */
function unionLength(intervals: Array<[number, number]>): number {
  const sorted = [...intervals].sort((a, b) => a[0] - b[0])
  let total = 0
  let end = Number.NEGATIVE_INFINITY
  for (const [s, e] of sorted) {
    if (e <= end) continue
    total += e - Math.max(s, end)
    end = e
  }
  return total
}

export async function orchestrationShare(
  client: Client,
  runId: string,
  iterations: number,
): Promise<OrchestrationShare> {
  const perIteration: OrchestrationShare['perIteration'] = []
  for (let k = 0; k < iterations; k++) {
    const history = await client.workflow.getHandle(`${runId}/iter-${k}`).fetchHistory()
    const events = history.events ?? []
    const first = events[0]
    const last = events.at(-1)
    if (!first || !last) continue
    const started = new Map<string, number>()
    const intervals: Array<[number, number]> = []
    for (const e of events) {
      if (e.activityTaskStartedEventAttributes) started.set(String(e.eventId), ms(e))
      const done =
        e.activityTaskCompletedEventAttributes ??
        e.activityTaskFailedEventAttributes ??
        e.activityTaskTimedOutEventAttributes
      const from = done?.startedEventId == null ? undefined : started.get(String(done.startedEventId))
      if (from !== undefined) intervals.push([from, ms(e)])
    }
    perIteration.push({
      iteration: k,
      wallSeconds: (ms(last) - ms(first)) / 1000,
      computeSeconds: unionLength(intervals) / 1000,
    })
  }
  const wall = perIteration.reduce((a, p) => a + p.wallSeconds, 0)
  const compute = perIteration.reduce((a, p) => a + p.computeSeconds, 0)
  const shares = perIteration.map((p) => 1 - p.computeSeconds / Math.max(p.wallSeconds, 1e-9)).sort((a, b) => a - b)
  return {
    iterations: perIteration.length,
    wallSeconds: wall,
    computeSeconds: compute,
    orchestrationSeconds: wall - compute,
    share: wall > 0 ? 1 - compute / wall : 0,
    medianShare: shares.length ? (shares[Math.floor((shares.length - 1) / 2)] as number) : 0,
    perIteration,
  }
}
