// `seedflow retry | pause | resume | abort <run>`: the operator's signals and updates (workflows/operator.ts)
// sent to a running run. retry is an update: a run that is not waiting for an operator, or bad overrides, are
// rejected with the reason (every bad field path) and change nothing.
import { WorkflowUpdateFailedError } from '@temporalio/client'
import { bounded } from '../infra/bounded-text.ts'
import {
  abortSignal,
  pauseSignal,
  resumeSignal,
  retryIterationUpdate,
  setHyperparametersUpdate,
} from '../workflows/operator.ts'
import { readOverrides } from './overrides.ts'
import { CliError, connectToRun, type RunClient, refusal } from './run-client.ts'

function say(line: string): void {
  process.stdout.write(`seedflow: ${line}\n`)
}

async function withRun<T>(runId: string, body: (run: RunClient) => Promise<T>): Promise<T> {
  const run = await connectToRun(runId)
  try {
    const description = await run.handle.describe()
    if (description.status.name !== 'RUNNING')
      throw new CliError(`run ${runId} on ${run.address} is not running (${description.status.name})`)
    return await body(run)
  } finally {
    await run.close()
  }
}

export async function retryCommand(runId: string, options: { set?: string[]; overrides?: string }): Promise<void> {
  const overrides = await readOverrides(options)
  await withRun(runId, async (run) => {
    try {
      const accepted = await run.handle.executeUpdate(retryIterationUpdate, {
        args: [overrides === undefined ? {} : { overrides }],
      })
      const what = accepted.iteration >= 0 ? `iteration ${accepted.iteration}` : 'the failed phase'
      const changed = accepted.change ? ` with ${JSON.stringify(accepted.change.overrides)}` : ''
      say(`run ${runId}: retrying ${what}${changed} (config ${accepted.configSha256.slice(0, 12)})`)
    } catch (error) {
      if (error instanceof WorkflowUpdateFailedError)
        throw new CliError(`run ${runId} refused the retry: ${refusal(error)}`)
      throw error
    }
  })
}

export async function setCommand(runId: string, options: { set?: string[]; overrides?: string }): Promise<void> {
  const overrides = await readOverrides(options)
  if (overrides === undefined) throw new CliError('nothing to set: give --set <path=value> or --overrides <file>')
  await withRun(runId, async (run) => {
    try {
      const change = await run.handle.executeUpdate(setHyperparametersUpdate, { args: [overrides] })
      say(
        `run ${runId}: ${JSON.stringify(change.overrides)} accepted as change ${change.seq}; ` +
          'the next phase runs with it',
      )
    } catch (error) {
      if (error instanceof WorkflowUpdateFailedError)
        throw new CliError(`run ${runId} refused the change: ${refusal(error)}`)
      throw error
    }
  })
}

export async function pauseCommand(runId: string): Promise<void> {
  await withRun(runId, (run) => run.handle.signal(pauseSignal))
  say(`run ${runId}: paused; the running phase finishes, no new phase starts until \`seedflow resume ${runId}\``)
}

export async function resumeCommand(runId: string): Promise<void> {
  await withRun(runId, (run) => run.handle.signal(resumeSignal))
  say(`run ${runId}: resumed`)
}

export async function abortCommand(runId: string, options: { reason?: string; now?: boolean }): Promise<void> {
  const reason = options.reason ?? 'aborted by the operator'
  const retrying = await withRun(runId, async (run) => {
    const found = await retryingActivity(run)
    const now = options.now === true || found !== undefined
    await run.handle.signal(abortSignal, { reason, ...(now ? { now } : {}) })
    return found
  })
  if (retrying)
    say(
      `run ${runId}: aborting; its ${retrying.activity} is retrying after failures (attempt ${retrying.attempt}` +
        `${retrying.failure ? `, last failure: ${retrying.failure}` : ''}), so it is cancelled now; finished shards stay in the store`,
    )
  else if (options.now)
    say(`run ${runId}: aborting now; the running phase is cancelled (finished shards stay in the store)`)
  else say(`run ${runId}: aborting; it ends after the running phase (\`seedflow status ${runId}\` shows when)`)
}

/** An activity of the run, or of its running iteration child, that has failed before and is being retried. */
async function retryingActivity(
  run: RunClient,
): Promise<{ activity: string; attempt: number; failure: string | undefined } | undefined> {
  const description = await run.handle.describe()
  const children = (description.raw.pendingChildren ?? []).map((c) => c.workflowId).filter((id) => !!id)
  const pending = [...(description.raw.pendingActivities ?? [])]
  for (const id of children) {
    const child = await run.client.workflow
      .getHandle(id as string)
      .describe()
      .catch(() => undefined)
    pending.push(...(child?.raw.pendingActivities ?? []))
  }
  for (const a of pending) {
    const attempt = a.attempt ?? 1
    if (attempt > 1 || a.lastFailure)
      return {
        activity: a.activityType?.name ?? 'activity',
        attempt,
        failure: a.lastFailure?.message ? bounded(a.lastFailure.message.split('\n')[0] ?? '', 200) : undefined,
      }
  }
  return undefined
}
