// The CLI's connection to Temporal: a connect that fails in seconds naming the address and what to do, a close
// that no retry of the SDK's can outlive, and a watch that notices a server that has gone away.
//
// The SDK retries a failed call from a timer (its gRPC retry interceptor). A timer that fires after the
// connection closed calls into the closed channel and throws `Channel has been shut down` from the timer: an
// uncaught exception that ends the command with exit 1, whatever it was about to report. So `close` first stops
// new retries, waits for the ones already scheduled (at most the SDK's 5 s backoff, usually none), then closes.
import {
  Connection,
  type ConnectionOptions,
  defaultGrpcRetryOptions,
  type GrpcRetryOptions,
  makeGrpcRetryInterceptor,
} from '@temporalio/client'
import { boundedMessage } from '../infra/bounded-text.ts'

export class TemporalUnreachableError extends Error {
  override name = 'TemporalUnreachableError'
}

export interface TemporalConnection {
  connection: Connection
  /** Closes once no retry is scheduled any more; idempotent. */
  close(): Promise<void>
}

/** Seconds a connect may take before the command gives up (the SDK's default is 10). */
export const CONNECT_TIMEOUT_S = 5

/** A retry policy that can be switched off, and that knows when its last scheduled retry fires. */
export class ClosableRetries {
  #closing = false
  #lastRetryAt = 0
  readonly options: GrpcRetryOptions

  constructor(base: GrpcRetryOptions = defaultGrpcRetryOptions()) {
    this.options = {
      retryableDecider: (attempt, status) => !this.#closing && base.retryableDecider(attempt, status),
      delayFunction: (attempt, status) => {
        const ms = base.delayFunction(attempt, status)
        this.#lastRetryAt = Math.max(this.#lastRetryAt, Date.now() + ms)
        return ms
      },
    }
  }

  /** No retry is scheduled from now on; resolves once every retry scheduled before has fired. */
  async stop(): Promise<void> {
    this.#closing = true
    const wait = this.#lastRetryAt - Date.now()
    // a later expiry than the SDK's timer: it fires after that one
    if (wait >= 0) await new Promise((resolve) => setTimeout(resolve, wait + 5))
  }
}

/**
 * A client connection to `options.address`; TemporalUnreachableError naming the address and `hint` when nothing
 * answers within CONNECT_TIMEOUT_S.
 */
export async function connectTemporal(
  options: ConnectionOptions,
  hint: string,
  retries: ClosableRetries = new ClosableRetries(),
): Promise<TemporalConnection> {
  let connection: Connection
  try {
    connection = await Connection.connect({
      ...options,
      connectTimeout: `${CONNECT_TIMEOUT_S} seconds`,
      interceptors: [makeGrpcRetryInterceptor(retries.options)],
    })
  } catch (error) {
    throw new TemporalUnreachableError(
      `cannot reach Temporal at ${options.address ?? '(default address)'} within ${CONNECT_TIMEOUT_S} s (${boundedMessage(error)}): ${hint}`,
    )
  }
  let closed: Promise<void> | undefined
  return {
    connection,
    close() {
      closed ??= retries.stop().then(() => connection.close())
      return closed
    },
  }
}

export interface ReachabilityWatch {
  /** Rejects with TemporalUnreachableError once the server has not answered `failures` probes in a row. */
  lost: Promise<never>
  stop(): Promise<void>
}

/**
 * Probes the server every `intervalMs` on a connection of its own without retries (a refused connection shows at
 * once instead of after the SDK's backoff): the Worker's own connect retries for about 10 s before it gives up.
 */
export function watchReachable(
  options: ConnectionOptions,
  { intervalMs = 500, failures = 3, probeTimeoutMs = 2000 } = {},
): ReachabilityWatch {
  const probe = Connection.lazy({ ...options, interceptors: [] })
  const address = options.address ?? '(default address)'
  let stopped = false
  let wake: () => void = () => {}
  const pause = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, intervalMs)
      wake = () => {
        clearTimeout(timer)
        resolve()
      }
    })
  const lost = (async (): Promise<never> => {
    let failed = 0
    let last: unknown
    while (!stopped) {
      try {
        await probe.withDeadline(Date.now() + probeTimeoutMs, () => probe.workflowService.getSystemInfo({}))
        failed = 0
      } catch (error) {
        last = error
        if (!stopped && ++failed >= failures)
          throw new TemporalUnreachableError(
            `Temporal at ${address} stopped answering (${failed} probes ${intervalMs} ms apart failed; last: ${boundedMessage(last)})`,
          )
      }
      await pause()
    }
    return new Promise<never>(() => {}) // stopped: never settles
  })()
  lost.catch(() => {}) // a caller that stopped watching does not care
  return {
    lost,
    async stop() {
      stopped = true
      wake()
      await probe.close()
    },
  }
}
