// Every failure that leaves an activity, bounded in size: its message, stack, details and causes. A failure
// larger than the server takes (gRPC's 4 MB) cannot be reported at all: the worker's completion is refused with
// ResourceExhausted, and the attempt waits for its heartbeat or start-to-close timeout before it is retried.
// Bounded here, once for every activity, the failure reaches the workflow at once with its type and
// retryability unchanged.
import { ApplicationFailure, CancelledFailure } from '@temporalio/common'
import type { ActivityInterceptorsFactory } from '@temporalio/worker'
import { bounded, MESSAGE_LIMIT } from '../infra/bounded-text.ts'

/** Most characters of a stack trace and of the details of one failure (JSON). */
const STACK_LIMIT = 8000
const DETAILS_LIMIT = 16_000
/** Causes kept below the failure itself. */
const CAUSE_DEPTH = 4

function fits(error: Error): boolean {
  return error.message.length <= MESSAGE_LIMIT && (error.stack ?? '').length <= STACK_LIMIT
}

function boundedDetails(details: unknown[] | undefined | null): unknown[] | undefined {
  if (!details || details.length === 0) return undefined
  let json: string
  try {
    json = JSON.stringify(details)
  } catch {
    return ['(details not serializable)']
  }
  return json.length <= DETAILS_LIMIT ? details : [bounded(json, DETAILS_LIMIT)]
}

/**
 * `error` as a failure no larger than the limits: an ApplicationFailure keeps its type, retryability and
 * details (bounded); another error becomes the ApplicationFailure the SDK would make of it (type = its name,
 * retryable), bounded. Cancellations pass through.
 */
export function boundFailure(error: unknown, depth = 0): unknown {
  if (error instanceof CancelledFailure) return error
  if (!(error instanceof Error)) return bounded(String(error))
  const cause = error.cause !== undefined && depth < CAUSE_DEPTH ? boundFailure(error.cause, depth + 1) : undefined
  if (error instanceof ApplicationFailure && fits(error) && cause === error.cause) return error
  const failure = ApplicationFailure.create({
    message: bounded(error.message),
    type: (error instanceof ApplicationFailure ? error.type : error.name) ?? undefined,
    nonRetryable: error instanceof ApplicationFailure ? !!error.nonRetryable : false,
    details: error instanceof ApplicationFailure ? boundedDetails(error.details) : undefined,
    ...(error instanceof ApplicationFailure && error.nextRetryDelay !== undefined
      ? { nextRetryDelay: error.nextRetryDelay }
      : {}),
    ...(cause instanceof Error ? { cause } : {}),
  })
  failure.stack = bounded(error.stack ?? '', STACK_LIMIT)
  return failure
}

/** The interceptor: the outermost of a worker's activity interceptors, so it sees what every other one throws. */
export const boundedFailures: ActivityInterceptorsFactory = () => ({
  inbound: {
    async execute(input, next) {
      try {
        return await next(input)
      } catch (error) {
        throw boundFailure(error)
      }
    },
  },
})
