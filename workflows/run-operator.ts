// Deterministic: runs in the workflow sandbox. The operator's side of a seedRun: pause and resume between
// phases, abort, hyperparameter changes, and waiting for an operator after a failed iteration instead of failing
// the run (docs/design.md §10.3). The handlers of workflows/operator.ts, the run state they change, and the
// forwarding of pause, resume, abort and changed configurations to the running iteration child.
import { ActivityFailure, ChildWorkflowFailure } from '@temporalio/common'
import {
  ApplicationFailure,
  CancellationScope,
  type ChildWorkflowHandle,
  condition,
  isCancellation,
  log,
  patched,
  setHandler,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow'
import type { HyperparameterChange, RunRef } from '../records/contracts.ts'
import { checkOverrides, type HyperparameterOverrides } from '../seed/hyperparameters.ts'
import { control } from './activity-proxies.ts'
import {
  ABORTED_TYPE,
  abortSignal,
  describeFailure,
  pauseSignal,
  type RetryAccepted,
  RunAborted,
  type RunProgress,
  type RunStatus,
  rejection,
  resumeSignal,
  retryIterationUpdate,
  setHyperparametersUpdate,
  setRunSignal,
} from './operator.ts'
import { OperatorGate } from './operator-gate.ts'
import { enterPhase } from './phase-boundary.ts'
import { SEED_ALGORITHM, SEED_ENV, SEED_ITERATION, SEED_PHASE } from './search-attributes.ts'
import { type IterationInput, type IterationResult, seedIteration } from './seed-iteration.ts'

/** The patch under which a resumed run (a rerun of its id, an operator's retry) re-hashes what it may reuse. */
export const VERIFY_ON_RESUME = 'verify-stored-on-resume'

/** What continueAsNew carries of the operator's state. */
export interface OperatorCarry {
  overrides: HyperparameterOverrides
  hyperparameters: HyperparameterChange[]
  paused: boolean
}

type Signal = typeof pauseSignal | typeof resumeSignal | typeof abortSignal

/** How a phase of the run shows itself and where its failure belongs (RunOperator.phase). */
export interface RunPhaseOptions {
  /** The iteration a failure of the phase belongs to (−1, the default, before Stage 2). */
  iteration?: number
  /**
   * The phase shows itself as its boundary's name: SeedPhase, then the status's phase (stage1, fork, annotate).
   * Otherwise its body shows it (evaluate, again on a retry), its child does (an iteration), or the status keeps
   * the phase it holds (prepare).
   */
  shows?: boolean
  /** Status fields set once the boundary is passed (an iteration: its phase and number). */
  status?: Partial<RunProgress>
}

export class RunOperator {
  /** The RunRef the next phases run under: the planned run, or its changed configuration. */
  run: RunRef | null
  overrides: HyperparameterOverrides
  /** The one pause/abort gate (workflows/operator-gate.ts); the status query reads its state. */
  readonly gate: OperatorGate
  #retry = false
  #applying = false
  #child: ChildWorkflowHandle<typeof seedIteration> | null = null
  /** The scope of the running phase (orWait's body), cancelled by an abort with `now`. */
  #phase: CancellationScope | null = null

  constructor(
    /** The run's configuration as given (overrides are checked on top of it). */
    private readonly config: unknown,
    private readonly status: RunProgress,
    run: RunRef | null,
    carried: OperatorCarry | undefined,
  ) {
    this.run = run
    this.overrides = carried?.overrides ?? {}
    status.hyperparameters = carried?.hyperparameters ?? []
    status.configSha256 = run?.configSha256 ?? null
    this.gate = new OperatorGate(carried?.paused ?? false, {
      paused: () => this.#forward(pauseSignal),
      resumed: () => this.#forward(resumeSignal),
      aborted: async ({ reason, now }) => {
        if (now) this.#phase?.cancel()
        await this.#forward(abortSignal, { reason })
      },
      abortAt: (reason) => new RunAborted(reason),
    })
  }

  /** Why the run is being aborted, once the operator asked (or an iteration was aborted). */
  get aborted(): { reason: string } | null {
    return this.gate.aborted
  }

  /** What the `status` query answers: the run's status with the gate's pause and abort state. */
  view(): RunStatus {
    const { gate } = this
    return {
      ...this.status,
      paused: gate.paused,
      held: gate.held,
      next: gate.next,
      aborted: gate.aborted?.reason ?? null,
      ...(this.run?.store ? { store: this.run.store } : {}),
    }
  }

  carry(): OperatorCarry {
    return { overrides: this.overrides, hyperparameters: this.status.hyperparameters, paused: this.gate.paused }
  }

  install(): void {
    const { status } = this
    this.gate.install()
    setHandler(setHyperparametersUpdate, (overrides) => this.#apply(overrides, 'setHyperparameters'), {
      validator: (overrides) => this.#check(overrides),
    })
    setHandler(
      retryIterationUpdate,
      async (request): Promise<RetryAccepted> => {
        const wait = status.awaitingOperator
        if (!wait) throw ApplicationFailure.nonRetryable(this.#notWaiting(), 'NotAwaitingOperator')
        const change = request?.overrides === undefined ? null : await this.#apply(request.overrides, 'retryIteration')
        this.#retry = true
        return { iteration: wait.iteration, configSha256: this.run?.configSha256 ?? '', change }
      },
      {
        validator: (request) => {
          if (!status.awaitingOperator) throw new Error(this.#notWaiting())
          if (request?.overrides !== undefined) this.#check(request.overrides)
        },
      },
    )
  }

  #notWaiting(): string {
    return `run ${this.status.runId} is not waiting for an operator (it is in ${this.status.phase}); retry applies to a failed iteration`
  }

  #check(overrides: unknown): void {
    const checked = checkOverrides(this.config, this.overrides, overrides)
    if (!checked.ok) throw rejection('invalid hyperparameters', checked.problems)
  }

  /** Records a change (one at a time, once the run is planned) and hands the new RunRef to the running child. */
  async #apply(overrides: unknown, source: HyperparameterChange['source']): Promise<HyperparameterChange> {
    await condition(() => this.run !== null && !this.#applying)
    this.#applying = true
    try {
      const checked = checkOverrides(this.config, this.overrides, overrides)
      if (!checked.ok) throw rejection('invalid hyperparameters', checked.problems)
      const { status } = this
      const change: HyperparameterChange = {
        seq: status.hyperparameters.length,
        source,
        iteration: status.iteration,
        phase: status.phase,
        overrides: checked.overrides,
        cumulative: checked.cumulative,
        at: new Date().toISOString(),
      }
      let run: RunRef
      try {
        run = (await control.recordHyperparameters({ run: this.run as RunRef, change })).run
      } catch (error) {
        const failure = describeFailure(error, status.iteration, change.at)
        throw ApplicationFailure.nonRetryable(`recording the change failed: ${failure.message}`, failure.type)
      }
      this.run = run
      this.overrides = checked.cumulative
      const recorded = { ...change, configSha256: run.configSha256 }
      status.hyperparameters.push(recorded)
      status.configSha256 = run.configSha256
      log.info(`hyperparameters changed (${source})`, { overrides: checked.overrides, configSha256: run.configSha256 })
      await this.#forward(setRunSignal, run)
      return recorded
    } finally {
      this.#applying = false
    }
  }

  async #forward(signal: Signal | typeof setRunSignal, ...args: unknown[]): Promise<void> {
    const child = this.#child
    if (!child) return
    try {
      await child.signal(signal as typeof setRunSignal, ...(args as [RunRef]))
    } catch (error) {
      log.info(`the iteration child took no ${signal.name} signal (it has ended)`, { error: String(error) })
    }
  }

  /**
   * One phase of the run: its boundary before `next` (workflows/phase-boundary.ts: waits while paused, ends the run
   * when aborted, shows the phase), then `body`, which waits for an operator when it fails (orWait).
   */
  async phase<T>(next: string, body: () => Promise<T>, options: RunPhaseOptions = {}): Promise<T> {
    const { status } = this
    await enterPhase(this.gate, next, {
      ...(options.shows ? { seedPhase: next } : {}),
      status: () => Object.assign(status, options.shows ? { phase: next } : {}, options.status),
    })
    return this.orWait(options.iteration ?? -1, body)
  }

  /** Runs iteration `input.iteration` as the child `<run>/iter-<k>`, forwarding the operator's signals to it. */
  async iteration(input: Omit<IterationInput, 'run' | 'paused'>): Promise<IterationResult> {
    const run = this.run as RunRef
    const paused = this.gate.paused
    const child = await startChild(seedIteration, {
      workflowId: `${run.runId}/iter-${input.iteration}`,
      args: [{ ...input, run, ...(paused ? { paused } : {}) }],
      // the child is filtered like its run in the Web UI (SeedEnv, SeedAlgorithm); it sets its phase itself
      typedSearchAttributes: [
        { key: SEED_ENV, value: input.plan.env },
        { key: SEED_ALGORITHM, value: input.plan.algorithm },
        { key: SEED_ITERATION, value: input.iteration },
      ],
    })
    this.#child = child
    try {
      // what changed while the child was being started
      if (this.gate.paused !== paused) await this.#forward(this.gate.paused ? pauseSignal : resumeSignal)
      if (this.run && this.run.configSha256 !== run.configSha256) await this.#forward(setRunSignal, this.run)
      if (this.aborted) await this.#forward(abortSignal, { reason: this.aborted.reason })
      return await child.result()
    } finally {
      this.#child = null
    }
  }

  /**
   * Runs `body`; when it fails (after its activities' retries), the run waits for an operator: status
   * `awaiting-operator` with the failure, SeedPhase `awaiting-operator`, until `retryIteration` (run `body`
   * again) or `abort`. An iteration aborted by the operator ends the run.
   */
  async orWait<T>(iteration: number, body: () => Promise<T>): Promise<T> {
    const { status } = this
    let retried = false
    for (;;) {
      try {
        const scope = new CancellationScope()
        this.#phase = scope
        // a retry reuses what the failed attempt and earlier phases stored: every artifact the run may reuse is
        // re-hashed first, and all damaged ones are named at once (runs from before this did not)
        const verify = retried && patched(VERIFY_ON_RESUME)
        try {
          return await scope.run(async () => {
            if (verify) await control.verifyRun({ run: this.run as RunRef })
            return body()
          })
        } finally {
          this.#phase = null
        }
      } catch (error) {
        if (this.aborted && isCancellation(error)) throw new RunAborted(this.aborted.reason)
        if (!(error instanceof ChildWorkflowFailure || error instanceof ActivityFailure)) throw error
        const failure = describeFailure(error, iteration, new Date().toISOString())
        if (this.aborted || failure.type === ABORTED_TYPE) {
          this.gate.aborted ??= { reason: failure.message }
          throw new RunAborted(this.gate.aborted.reason)
        }
        const phase = status.phase
        Object.assign(status, { phase: 'awaiting-operator', awaitingOperator: failure })
        upsertSearchAttributes([{ key: SEED_PHASE, value: 'awaiting-operator' }])
        log.warn(`run ${workflowInfo().workflowId} awaits an operator: ${failure.type} in ${failure.phase}`, {
          ...failure,
        })
        this.#retry = false
        await condition(() => this.#retry || this.aborted !== null)
        retried = true
        Object.assign(status, { phase, awaitingOperator: null })
        if (!this.aborted) upsertSearchAttributes([{ key: SEED_PHASE, value: phase }]) // no longer listed as waiting
        await this.gate.boundary(phase) // an abort while waiting ends the run here; a pause holds the retry
      }
    }
  }
}
