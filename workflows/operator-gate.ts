// Deterministic: runs in the workflow sandbox. The one pause/abort gate, used by the run (workflows/run-operator.ts)
// and by each iteration child (workflows/seed-iteration.ts): the `pause`, `resume` and `abort` signals, the held
// state between phases, and what an abort does at the next boundary. It owns the pause state; the status
// queries read it from here.
import { condition, setHandler } from '@temporalio/workflow'
import { type AbortRequest, abortSignal, pauseSignal, resumeSignal } from './operator.ts'

export interface GateHooks {
  /** After the gate changed (the run forwards the signal to its iteration child). */
  paused?(): Promise<void> | void
  resumed?(): Promise<void> | void
  aborted?(request: { reason: string; now: boolean }): Promise<void> | void
  /** What an abort becomes at a boundary (the run ends; the iteration fails as aborted). */
  abortAt(reason: string, next: string): Error
}

export class OperatorGate {
  paused: boolean
  /** True while a boundary waits because the gate is paused; `next` is the phase that starts on resume. */
  held = false
  next: string | null = null
  aborted: { reason: string } | null = null

  constructor(
    paused: boolean,
    private readonly hooks: GateHooks,
  ) {
    this.paused = paused
  }

  /** Installs the signal handlers (once per workflow). */
  install(): this {
    setHandler(pauseSignal, async () => {
      this.paused = true
      await this.hooks.paused?.()
    })
    setHandler(resumeSignal, async () => {
      this.paused = false
      await this.hooks.resumed?.()
    })
    setHandler(abortSignal, async (request?: AbortRequest) => {
      this.aborted ??= { reason: request?.reason ?? 'aborted by the operator' }
      this.paused = false // an abort ends a pause: nothing waits for a resume any more
      await this.hooks.aborted?.({ reason: this.aborted.reason, now: request?.now ?? false })
    })
    return this
  }

  /** Between phases, before `next`: waits while paused; an abort throws what the hooks make of it. */
  async boundary(next: string): Promise<void> {
    if (this.paused && !this.aborted) {
      this.held = true
      this.next = next
      await condition(() => !this.paused || this.aborted !== null)
      this.held = false
      this.next = null
    }
    if (this.aborted) throw this.hooks.abortAt(this.aborted.reason, next)
  }
}
