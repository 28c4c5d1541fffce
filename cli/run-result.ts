// Waiting for a run's result without the Temporal client's long poll. The SDK adds an 'abort' listener to the call
// context's signal for every RPC and never removes it (@temporalio/client connection.js, `abortSignal.addEventListener
// ('abort', () => call.cancel())`), so `handle.result()` under one signal gathered a listener, and the call it holds,
// per long poll for the whole run: the MaxListenersExceededWarning a few minutes into every `seedflow run` (11
// listeners), and memory that grew with the run. Here each check runs under its own signal, linked to the caller's
// only while it runs, and the result is read once the run has closed.
import { setTimeout as sleep } from 'node:timers/promises'
import type { Client, WorkflowHandle } from '@temporalio/client'

/** `fn` under a signal of its own that `outer` aborts while `fn` runs; nothing stays attached to `outer` after. */
async function linked<T>(outer: AbortSignal, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  outer.throwIfAborted()
  const inner = new AbortController()
  const abort = () => inner.abort(outer.reason)
  outer.addEventListener('abort', abort, { once: true })
  try {
    return await fn(inner.signal)
  } finally {
    outer.removeEventListener('abort', abort)
  }
}

/**
 * The result of `handle`'s workflow (its chain of continued runs followed), once the latest run of `runId` is no
 * longer running: checked every `intervalMs`; `signal` ends the wait.
 */
export async function awaitRunResult<T>(
  client: Client,
  runId: string,
  handle: WorkflowHandle,
  signal: AbortSignal,
  intervalMs = 1000,
): Promise<T> {
  const latest = client.workflow.getHandle(runId)
  for (;;) {
    const { status } = await linked(signal, (s) => client.withAbortSignal(s, () => latest.describe()))
    if (status.name !== 'RUNNING' && status.name !== 'CONTINUED_AS_NEW')
      return linked(signal, (s) => client.withAbortSignal(s, () => handle.result() as Promise<T>))
    await sleep(intervalMs, undefined, { signal })
  }
}
