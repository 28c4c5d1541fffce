// The phase wrapper's counters of one worker process, as a JSON-lines file an operator can `tail -f` and a test can
// read from outside the process: one line per event, appended synchronously (a killed worker loses at most the
// event it was writing), each carrying the running totals.
import { appendFileSync, mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { PhaseCounters, type PhaseEvent } from '../activities/phase.ts'

/** One line of a counters file. */
export interface CountersLine {
  at: string
  pid: number
  event: PhaseEvent['event']
  runId: string
  phase: PhaseEvent['scope']['phase']
  /** Absent for run-level phases (warmstart, sft and the evaluations before Stage 2). */
  iteration?: number
  shard: number
  attempt: number
  /** Totals of this process so far, per phase: shards computed and shards whose finished manifest was reused. */
  computed: Record<string, number>
  reused: Record<string, number>
}

/**
 * Counters that append every event to `path` (created with its folder). A failed write is reported once on
 * stderr and never fails the phase: the counters are an observation, not part of the result.
 */
export function countersWritingTo(path: string): PhaseCounters {
  return new PhaseCounters(countersFileListener(path))
}

/** The PhaseCounters listener of countersWritingTo, for a listener that also does other things. */
export function countersFileListener(path: string): (e: PhaseEvent, counters: PhaseCounters) => void {
  mkdirSync(dirname(path), { recursive: true })
  let warned = false
  return (e, counters) => {
    const line: CountersLine = {
      at: new Date().toISOString(),
      pid: process.pid,
      event: e.event,
      runId: e.scope.runId,
      phase: e.scope.phase,
      ...(e.scope.iteration === undefined ? {} : { iteration: e.scope.iteration }),
      shard: e.scope.shard,
      attempt: e.attempt,
      computed: Object.fromEntries(counters.computed),
      reused: Object.fromEntries(counters.reused),
    }
    try {
      appendFileSync(path, `${JSON.stringify(line)}\n`)
    } catch (error) {
      if (!warned) process.stderr.write(`seedflow: cannot write the counters file ${path}: ${error}\n`)
      warned = true
    }
  }
}
