// `seedflow status <run>`: where a run is (phase, iteration k of K with a progress bar), its evaluations, and
// what the operator needs to know: paused, awaiting an operator with the failure, hyperparameter changes.
import {
  ActivityFailure,
  ChildWorkflowFailure,
  type WorkflowExecutionDescription,
  WorkflowFailedError,
} from '@temporalio/client'
import { describeStore } from '../activities/store-binding.ts'
import { bounded } from '../infra/bounded-text.ts'
import { runOfTaskQueue } from '../workers/task-queues.ts'
import { iterationStatusQuery } from '../workflows/operator.ts'
import { type Evaluation, type RunStatus, type SeedRunResult, statusQuery } from '../workflows/seed-run.ts'
import { operatorHint } from './operator-hints.ts'
import { formatAnnotation, formatEvaluation } from './progress.ts'
import { CliError, connectToRun, type RunClient } from './run-client.ts'

/** `[########------------] 2/5`: `done` of `total` as a bar of `width` cells. */
export function progressBar(done: number, total: number, width = 20): string {
  const share = total > 0 ? Math.min(1, Math.max(0, done / total)) : 0
  const filled = Math.round(share * width)
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${done}/${total}`
}

/** Seconds `seedflow status` waits for a running run to answer, counted from the command's start (--timeout). */
export const STATUS_TIMEOUT_S = 15
/** The least a query is given, however long the command took to get there. */
const MIN_QUERY_MS = 1000

/**
 * `query` cancelled at `deadline` (performance.now(): ms since the process started), so that a run with no worker
 * to answer ends the command then, not when the server gives up on the query; `timedOut` is the error then.
 */
async function beforeDeadline<T>(
  run: RunClient,
  deadline: number,
  query: () => Promise<T>,
  timedOut: () => Error,
): Promise<T> {
  const cancel = new AbortController()
  const timer = setTimeout(() => cancel.abort(), Math.max(MIN_QUERY_MS, deadline - performance.now()))
  try {
    return await run.client.withAbortSignal(cancel.signal, query)
  } catch (error) {
    if (cancel.signal.aborted) throw timedOut()
    throw error
  } finally {
    clearTimeout(timer)
  }
}

/** The run's status query; a running run with no worker to answer it is named as such. */
function queryStatus(run: RunClient, runId: string, taskQueue: string, timeoutS: number): Promise<RunStatus> {
  return beforeDeadline(
    run,
    timeoutS * 1000,
    () => run.handle.query(statusQuery),
    () =>
      new CliError(
        `run ${runId} on ${run.address} did not answer its status query within ${timeoutS} s of the command's start ` +
          `(--timeout): is a worker running? (\`${workerFor(runId, taskQueue)}\`)`,
      ),
  )
}

/** The worker that serves a run on `taskQueue`: a run on its own queues (`seedflow run`) needs `--run`. */
export function workerFor(runId: string, taskQueue: string): string {
  return runOfTaskQueue(taskQueue) === undefined ? 'seedflow worker' : `seedflow worker --run ${runId}`
}

/** The running iteration child's phase and hold: its status query, else its SeedPhase search attribute. */
async function childOf(run: RunClient, workflowId: string, timeoutS: number): Promise<ChildView | undefined> {
  const child = run.client.workflow.getHandle(workflowId)
  try {
    const s = await beforeDeadline(
      run,
      timeoutS * 1000,
      () => child.query(iterationStatusQuery),
      () => new Error('no answer'),
    )
    return { phase: s.phase, held: s.held }
  } catch {
    const value = (await child.describe().catch(() => undefined))?.searchAttributes.SeedPhase?.[0]
    return typeof value === 'string' ? { phase: value, held: false } : undefined
  }
}

/** What the status shows of the running iteration child. */
export interface ChildView {
  phase: string
  held: boolean
}

/** The `evaluations` block of status: one aligned line per held-out evaluation (none without any). */
function evaluationLines(evaluations: readonly Evaluation[]): string[] {
  if (evaluations.length === 0) return []
  const width = Math.max(...evaluations.map((e) => e.label.length))
  return ['  evaluations', ...evaluations.map((e) => `    ${e.label.padEnd(width)}  ${formatEvaluation(e)}`)]
}

/** The status lines of a run (pure: the status and the iteration child's phase, if any). */
export function formatStatus(status: RunStatus, workflow: string, child?: ChildView): string[] {
  const lines: string[] = []
  const config = status.configSha256 ? `, config ${status.configSha256.slice(0, 12)}` : ''
  lines.push(`run ${status.runId}: ${status.algorithm ?? '(not planned yet)'}${config} — workflow ${workflow}`)
  const inIteration = status.phase === 'iteration' && child !== undefined
  const childHeld = inIteration && child.held
  const held = status.paused && (status.held || childHeld) // a hold ends with the pause
  // held: the phase shown is the one that starts on resume, not one that runs
  const next = childHeld ? child.phase : (status.next ?? undefined)
  const where = inIteration ? `iteration ${status.iteration}: ${child.phase}` : status.phase
  const heldWhere = next ? `held before ${next}` : 'held between phases'
  lines.push(
    `  phase       ${held ? (inIteration ? `iteration ${status.iteration}: ${heldWhere}` : heldWhere) : where}`,
  )
  lines.push(`  iterations  ${progressBar(status.iteration, status.iterations)}`)
  if (status.store) lines.push(`  store       ${describeStore(status.store)}`)
  if (status.aborted)
    lines.push(
      `  aborting    ${status.aborted} — the run ends after its running phase (\`seedflow status\` shows when)`,
    )
  else if (status.paused)
    lines.push(
      `  paused      yes${held ? `, ${heldWhere}` : ', the running phase finishes first'} — resume with: seedflow resume ${status.runId}`,
    )
  const wait = status.awaitingOperator
  if (wait) {
    const at = wait.iteration >= 0 ? `iteration ${wait.iteration}` : 'before Stage 2'
    lines.push(`  AWAITING AN OPERATOR since ${wait.since}: ${wait.type} in ${wait.phase} (${at})`)
    for (const line of wait.message.split('\n')) lines.push(`    ${line}`)
    lines.push(`    then: ${operatorHint(wait.type, status.runId)}`)
  }
  if (status.annotation) lines.push(`  stage 1     ${formatAnnotation(status.annotation)}`)
  lines.push(...evaluationLines(status.evaluations))
  if (status.hyperparameters.length > 0) {
    lines.push('  hyperparameter changes')
    for (const c of status.hyperparameters)
      lines.push(
        `    #${c.seq} ${c.source} ${c.phase === 'iteration' ? 'during' : `in ${c.phase} of`} iteration ${c.iteration}: ${JSON.stringify(c.overrides)} → config ${(c.configSha256 ?? '').slice(0, 12)}`,
      )
  }
  return lines
}

export async function statusCommand(runId: string, options: { timeout?: number } = {}): Promise<void> {
  // commander hands an empty SEEDFLOW_STATUS_TIMEOUT over as it is: no value
  const timeoutS = typeof options.timeout === 'number' ? options.timeout : STATUS_TIMEOUT_S
  const run = await connectToRun(runId)
  try {
    const description = await run.handle.describe()
    const workflow = description.status.name
    if (workflow !== 'RUNNING') {
      // a closed run: its close event says how it ended; no query (that needs a worker to replay the run)
      const { lines, failed } = await closedStatus(run, runId, description)
      process.stdout.write(`${lines.join('\n')}\n`)
      if (failed) process.exitCode = 1
      return
    }
    const status = await queryStatus(run, runId, description.taskQueue, timeoutS)
    const child =
      status.phase === 'iteration' ? await childOf(run, `${runId}/iter-${status.iteration}`, timeoutS) : undefined
    process.stdout.write(`${formatStatus(status, workflow, child).join('\n')}\n`)
  } finally {
    await run.close()
  }
}

/** A closed run from its close event: the result of a completed one, the failure (type, message) of the rest. */
async function closedStatus(
  run: RunClient,
  runId: string,
  description: WorkflowExecutionDescription,
): Promise<{ lines: string[]; failed: boolean }> {
  const workflow = description.status.name
  const closed = description.closeTime ? ` at ${description.closeTime.toISOString()}` : ''
  const lines = [`run ${runId}: workflow ${workflow}${closed}`]
  let result: SeedRunResult
  try {
    result = await run.handle.result()
  } catch (error) {
    lines.push(...formatFailure(error))
    return { lines, failed: true }
  }
  return { lines: [...lines, ...formatResult(result)], failed: false }
}

/** The lines of a completed run's result: outcome, evaluations, final checkpoint (pure). */
export function formatResult(result: SeedRunResult): string[] {
  const lines = [
    result.outcome === 'aborted'
      ? `  outcome     aborted: ${result.aborted ?? '(no reason given)'}`
      : '  outcome     completed',
  ]
  if (result.store) lines.push(`  store       ${describeStore(result.store)}`)
  lines.push(...evaluationLines(result.evaluations))
  if (result.checkpoint)
    lines.push(`  checkpoint  ${result.checkpoint.prefix} (model sha256 ${result.checkpoint.sha256})`)
  return lines
}

/**
 * The lines of a failed, terminated, cancelled or timed-out run (pure): the failure that ended it, type and
 * message, with the activity or iteration it came from; the wrappers (activity, child workflow) are not shown.
 */
export function formatFailure(error: unknown): string[] {
  const lines: string[] = []
  const where: string[] = []
  let e: unknown = error instanceof WorkflowFailedError ? error.cause : error
  for (let shown = 0; e instanceof Error && shown < 4; e = e.cause) {
    if (e instanceof ActivityFailure) {
      where.push(e.activityType)
      continue
    }
    if (e instanceof ChildWorkflowFailure) {
      where.push(e.execution?.workflowId ?? e.workflowType)
      continue
    }
    const type = (e as { type?: string | null }).type ?? e.name
    const at = shown === 0 && where.length > 0 ? ` in ${where.join(' → ')}` : ''
    const [first = '', ...rest] = bounded(e.message).split('\n')
    lines.push(`  ${shown === 0 ? 'failure' : 'cause  '}     ${type}${at}: ${first}`)
    for (const line of rest) lines.push(`    ${line}`)
    shown++
  }
  if (lines.length === 0) lines.push(`  failure     ${bounded(String(error))}`)
  return lines
}
