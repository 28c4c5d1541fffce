// One decode batch for the whole server. Requests wait in a bounded queue; between steps the scheduler releases
// the rows of ended or abandoned sequences and admits waiting requests (a request's n choices together, into n
// rows, prefilled in one run with the others that join with them), then runs one step for every live row.
import type { SampledToken, SequenceSpec } from '../policy/decode-batch.ts'
import { ApiError, RETRY_AFTER_SECONDS } from './errors.ts'
import type { ServeMetrics } from './metrics.ts'

/** What the scheduler needs of a decode batch (policy/decode-batch.ts); tests wrap one to pace its steps. */
export interface DecodeStepper {
  readonly rows: number
  readonly capacity: number
  readonly free: number
  admit(specs: readonly SequenceSpec[]): Promise<SampledToken[]>
  step(): Promise<SampledToken[]>
  release(row: number): void
}

/** One sequence (one choice of a request). */
export interface SequenceJob {
  spec: SequenceSpec
  /** Tokens at most; the sequence ends with `length` at the last. */
  maxTokens: number
  /** Each sampled token; return true when the sequence ends with it (end of sequence, stop string). */
  onToken(token: SampledToken): boolean
  /** The sequence ended: `length` at max tokens, `stop` when onToken said so. */
  onEnd(reason: 'stop' | 'length'): void
}

export interface ScheduledRequest {
  jobs: SequenceJob[]
  /** True once the client went away: its rows are freed at the next step boundary. */
  cancelled(): boolean
  /** The request cannot be finished (shutdown past the grace period, a failed step). */
  onFail(error: ApiError): void
}

interface Running {
  request: ScheduledRequest
  job: SequenceJob
  tokens: number
}

export interface SchedulerOptions {
  /** Requests waiting for rows at most; one more is answered 429. */
  maxQueue: number
  metrics?: ServeMetrics
}

export class Scheduler {
  readonly #batch: DecodeStepper
  readonly #maxQueue: number
  readonly #metrics: ServeMetrics | undefined
  readonly #queue: { request: ScheduledRequest; at: number }[] = []
  readonly #rows = new Map<number, Running>()
  #wake: (() => void) | undefined
  #loop: Promise<void> | undefined
  #closing = false
  #stopped = false
  #idle: (() => void) | undefined

  constructor(batch: DecodeStepper, options: SchedulerOptions) {
    this.#batch = batch
    this.#maxQueue = options.maxQueue
    this.#metrics = options.metrics
  }

  get rows(): number {
    return this.#batch.rows
  }

  get capacity(): number {
    return this.#batch.capacity
  }

  get queued(): number {
    return this.#queue.length
  }

  get running(): number {
    return this.#rows.size
  }

  /** Queues a request; throws 503 while shutting down and 429 when the queue is full (both with Retry-After). */
  submit(request: ScheduledRequest): void {
    const retry = { 'Retry-After': String(RETRY_AFTER_SECONDS) }
    if (this.#closing)
      throw new ApiError(503, 'the server is shutting down', 'server_error', null, 'shutting_down', retry)
    if (request.jobs.length > this.#batch.rows)
      throw new ApiError(
        400,
        `n = ${request.jobs.length} exceeds the ${this.#batch.rows} rows of the decode batch`,
        'invalid_request_error',
        'n',
      )
    if (this.#queue.length >= this.#maxQueue)
      throw new ApiError(
        429,
        `the queue is full: ${this.#queue.length} requests wait for the decode batch (at most ${this.#maxQueue})`,
        'rate_limit_error',
        null,
        'queue_full',
        retry,
      )
    this.#queue.push({ request, at: performance.now() })
    this.#metrics?.queueLength.set(this.#queue.length)
    this.#loop ??= this.#run()
    this.#wake?.()
  }

  /**
   * Stops accepting requests (503), lets in-flight and queued ones finish for up to `graceMs`, then fails the
   * rest; resolves once the batch is idle.
   */
  async close(graceMs: number): Promise<void> {
    this.#closing = true
    const idle = new Promise<void>((resolve) => {
      this.#idle = resolve
    })
    if (this.#rows.size === 0 && this.#queue.length === 0) this.#idle?.()
    let timer: NodeJS.Timeout | undefined
    const expired = new Promise<'expired'>((resolve) => {
      timer = setTimeout(() => resolve('expired'), graceMs)
    })
    const outcome = await Promise.race([idle, expired])
    clearTimeout(timer)
    if (outcome === 'expired') {
      this.#stopped = true
      this.#wake?.()
      await this.#loop
      const error = new ApiError(
        503,
        `the server shut down before the request finished (grace period ${graceMs} ms)`,
        'server_error',
        null,
        'shutting_down',
      )
      this.#failAll(error)
    }
    this.#stopped = true
    this.#wake?.()
    await this.#loop
  }

  #failAll(error: ApiError): void {
    const failed = new Set<ScheduledRequest>()
    for (const [row, r] of this.#rows) {
      this.#batch.release(row)
      failed.add(r.request)
    }
    this.#rows.clear()
    for (const q of this.#queue.splice(0)) failed.add(q.request)
    for (const request of failed) request.onFail(error)
    this.#gauges()
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      this.#dropCancelled()
      const joining = this.#joiners()
      if (joining.length === 0 && this.#rows.size === 0) {
        if (this.#closing) this.#idle?.()
        await new Promise<void>((resolve) => {
          this.#wake = resolve
          if (this.#queue.length > 0 || this.#stopped) resolve()
        })
        this.#wake = undefined
        continue
      }
      try {
        if (joining.length > 0) await this.#admit(joining)
        if (this.#rows.size > 0) await this.#step()
      } catch (error) {
        this.#failAll(
          new ApiError(500, `decoding failed: ${(error as Error).message}`, 'server_error', null, 'decode_failed'),
        )
      }
    }
  }

  #dropCancelled(): void {
    for (const [row, r] of this.#rows)
      if (r.request.cancelled()) {
        this.#batch.release(row)
        this.#rows.delete(row)
      }
    for (let i = this.#queue.length - 1; i >= 0; i--)
      if ((this.#queue[i] as { request: ScheduledRequest }).request.cancelled()) this.#queue.splice(i, 1)
    this.#gauges()
  }

  /** Waiting requests, first come first served, that fit the free rows and the cache together. */
  #joiners(): { request: ScheduledRequest; at: number }[] {
    const group: { request: ScheduledRequest; at: number }[] = []
    let free = this.#batch.free
    let longest = 0
    for (const q of this.#queue) {
      const jobs = q.request.jobs
      if (jobs.length > free) break
      const P = Math.max(longest, ...jobs.map((j) => j.spec.prompt.length))
      // every member's new tokens must fit after the group's padded prompt
      const members = [...group.flatMap((g) => g.request.jobs), ...jobs]
      if (members.some((j) => P + j.maxTokens - 1 > this.#batch.capacity)) break
      group.push(q)
      free -= jobs.length
      longest = P
    }
    this.#queue.splice(0, group.length)
    this.#metrics?.queueLength.set(this.#queue.length)
    return group
  }

  async #admit(group: { request: ScheduledRequest; at: number }[]): Promise<void> {
    const members = group.flatMap((g) => g.request.jobs.map((job) => ({ request: g.request, job, at: g.at })))
    const first = await this.#batch.admit(members.map((m) => m.job.spec))
    const now = performance.now()
    for (const g of group) this.#metrics?.timeToFirstToken.observe((now - g.at) / 1000)
    this.#metrics?.prefills.inc()
    this.#metrics?.promptTokens.inc(members.reduce((n, m) => n + m.job.spec.prompt.length, 0))
    first.forEach((token, i) => {
      const m = members[i] as (typeof members)[number]
      this.#rows.set(token.row, { request: m.request, job: m.job, tokens: 0 })
    })
    this.#deliver(first)
  }

  async #step(): Promise<void> {
    const tokens = await this.#batch.step()
    this.#metrics?.decodeSteps.inc()
    this.#metrics?.stepRows.inc(tokens.length)
    this.#metrics?.stepOccupancy.observe(tokens.length)
    this.#deliver(tokens)
  }

  #deliver(tokens: SampledToken[]): void {
    this.#metrics?.sampled(tokens.length)
    for (const token of tokens) {
      const r = this.#rows.get(token.row)
      if (!r) continue
      r.tokens++
      const ended = r.job.onToken(token) ? 'stop' : r.tokens >= r.job.maxTokens ? 'length' : undefined
      if (!ended) continue
      this.#batch.release(token.row)
      this.#rows.delete(token.row)
      r.job.onEnd(ended)
    }
    this.#gauges()
  }

  #gauges(): void {
    this.#metrics?.runningSequences.set(this.#rows.size)
    this.#metrics?.queueLength.set(this.#queue.length)
  }
}
