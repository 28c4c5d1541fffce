// Progress of a running seedRun as lines on the terminal: the run's `status` query (phase, iteration,
// evaluations), the running iteration child's phase (its SeedPhase search attribute) and the heartbeat details of
// long activities (warm-start steps and validation checks). One line per change; the same in a terminal and a log.
import { type Client, type WorkflowExecutionDescription, WorkflowNotFoundError } from '@temporalio/client'
import { defaultPayloadConverter } from '@temporalio/common'
import type { AnnotationCounts, PhaseProgress } from '../records/contracts.ts'
import { type Evaluation, type RunStatus, statusQuery } from '../workflows/seed-run.ts'
import { operatorHint } from './operator-hints.ts'

export interface RunWatcher {
  /** Stops polling; `final`: the run's evaluations (its result), whose lines the polls have not printed yet. */
  stop(final?: readonly Evaluation[]): Promise<void>
}

const percent = (x: number) => `${(100 * x).toFixed(1)}%`

export function formatEvaluation(e: Evaluation): string {
  const se = Number.isFinite(e.standardError) ? ` ± ${percent(e.standardError)}` : ''
  const macro =
    e.macroSuccess !== undefined && Number.isFinite(e.macroSuccess) ? `, macro ${percent(e.macroSuccess)}` : ''
  const checkpoint = e.checkpointSha256 ? `, checkpoint ${e.checkpointSha256.slice(0, 12)}` : ''
  return `${percent(e.success)}${se} (${e.tasks} tasks${e.split ? ` of ${e.split}` : ''})${macro}${checkpoint}`
}

/** Stage 1's annotation as `run` and `status` print it: the failures named whenever there are any. */
export function formatAnnotation(a: AnnotationCounts): string {
  const failed = a.trajectories - a.annotated
  const why = failed > 0 ? ` (${failed} not: ${a.requestFailures} requests failed, ${a.unparsed} answers unparsed)` : ''
  return `annotated ${a.annotated} of ${a.trajectories} trajectories${why}`
}

/** The workflow's description; undefined while it does not exist (yet). */
async function describe(client: Client, workflowId: string): Promise<WorkflowExecutionDescription | undefined> {
  try {
    return await client.workflow.getHandle(workflowId).describe()
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return undefined
    throw error
  }
}

/** Heartbeat details of the activities a workflow is running now (those that reported any). */
async function pendingProgress(client: Client, workflowId: string): Promise<PhaseProgress[]> {
  const found: PhaseProgress[] = []
  for (const activity of (await describe(client, workflowId))?.raw.pendingActivities ?? []) {
    const payload = activity.heartbeatDetails?.payloads?.[0]
    if (!payload) continue
    const details = defaultPayloadConverter.fromPayload<PhaseProgress>(payload)
    if (details && typeof details.phase === 'string') found.push(details)
  }
  return found
}

async function childPhase(client: Client, workflowId: string): Promise<string | undefined> {
  const value = (await describe(client, workflowId))?.searchAttributes.SeedPhase?.[0]
  return typeof value === 'string' ? value : undefined
}

function describeProgress(p: PhaseProgress): string {
  const loss = p.loss === undefined ? '' : `, loss ${p.loss.toFixed(3)}`
  const check = p.successRate === undefined ? '' : `, validation success ${percent(p.successRate)}`
  return `${p.phase} step ${p.step}/${p.steps}${loss}${check}`
}

/** Polls the run every `intervalMs` and calls `print` with each new progress line. */
export function watchRun(client: Client, runId: string, print: (line: string) => void, intervalMs = 1000): RunWatcher {
  const started = performance.now()
  const clock = () => {
    const s = Math.round((performance.now() - started) / 1000)
    return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`
  }
  let last = ''
  let evaluationsShown = 0
  let annotationShown = false
  let stopped = false
  let failures = 0

  async function poll(): Promise<void> {
    let status: RunStatus
    try {
      status = await client.workflow.getHandle(runId).query(statusQuery)
    } catch {
      return // not started yet, or between continue-as-new runs
    }
    // Stage 1's annotation comes before its evaluation
    if (status.annotation && !annotationShown)
      print(`[${clock()}] stage 1 annotation: ${formatAnnotation(status.annotation)}`)
    annotationShown ||= status.annotation !== undefined
    for (const e of status.evaluations.slice(evaluationsShown))
      print(`[${clock()}] evaluation ${e.label}: ${formatEvaluation(e)}`)
    evaluationsShown = status.evaluations.length
    let line: string
    const wait = status.awaitingOperator
    if (wait) {
      line =
        `awaiting an operator: ${wait.type} in ${wait.phase} (iteration ${wait.iteration}): ${wait.message.split('\n')[0]}` +
        ` — then: ${operatorHint(wait.type, runId)}`
    } else if (status.phase === 'iteration') {
      const child = `${runId}/iter-${status.iteration}`
      const phase = (await childPhase(client, child)) ?? 'starting'
      line = `iteration ${status.iteration} (${status.iteration + 1} of ${status.iterations}): ${phase}`
    } else {
      const details = (await pendingProgress(client, runId)).map(describeProgress)
      line = [status.phase, ...details].join(': ')
    }
    if (line !== last) print(`[${clock()}] ${line}`)
    last = line
  }

  let wake: () => void = () => {}
  // stop() cancels a poll in flight: a query the run cannot answer now (its worker gone) must not hold the exit
  let cancel = new AbortController()
  const loop = (async () => {
    while (!stopped) {
      try {
        cancel = new AbortController()
        await client.withAbortSignal(cancel.signal, poll)
        failures = 0
      } catch (error) {
        if (stopped) break
        if (++failures === 3) print(`progress unavailable: ${(error as Error).message}`)
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, intervalMs)
        wake = () => {
          clearTimeout(timer)
          resolve()
        }
      })
    }
  })()

  return {
    async stop(final) {
      stopped = true
      wake()
      cancel.abort()
      await loop
      // the evaluations the polls missed, from the run's result: no query (a closed workflow's query needs a
      // worker to replay it, and the caller's may be shutting down)
      for (const e of final?.slice(evaluationsShown) ?? [])
        print(`[${clock()}] evaluation ${e.label}: ${formatEvaluation(e)}`)
      evaluationsShown = Math.max(evaluationsShown, final?.length ?? 0)
    },
  }
}
