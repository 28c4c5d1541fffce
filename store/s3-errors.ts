// How the S3 store tells its failures apart (a pure function, unit tested on SDK-shaped errors): the endpoint
// cannot be reached (StoreUnavailableError: a connection failure, a 5xx whose body is not an S3 error, e.g. a
// proxy's 502 page, or the conditional-write gate saying its upstream is gone), or the credentials are refused
// (StoreAccessError: SignatureDoesNotMatch, InvalidAccessKeyId, AccessDenied, ExpiredToken…, or a 401/403 with
// no body, which the SDK names only `Unknown` with the message `UnknownError`: HEAD replies carry no body).
import { STATUS_CODES } from 'node:http'
import { StoreAccessError, StoreUnavailableError } from './errors.ts'

/**
 * The header with which the conditional-write gate (infra/conditional-write-gate.ts) marks a reply of its own,
 * sent because it could not reach the S3 server behind it; its value says why.
 */
export const GATE_UNREACHABLE_HEADER = 'x-seedflow-upstream-unreachable'

export interface S3ErrorContext {
  /** The endpoint the store talks to, as the operator configured it. */
  endpoint: string
  bucket: string
  /** The request, e.g. `HeadObject runs/r/run.json`. */
  operation?: string
  /** The access key id the request was signed with: only its first characters reach a message. */
  accessKeyId?: string
}

/** Error codes that mean the request's credentials were refused, whatever the HTTP status. */
const ACCESS_CODES = new Set([
  'SignatureDoesNotMatch',
  'InvalidAccessKeyId',
  'XAdminUserNotFound', // versitygw, with a 404, for an unknown access key id (a HEAD then reads as NotFound)
  'AccessDenied',
  'AllAccessDisabled',
  'AccountProblem',
  'ExpiredToken',
  'TokenRefreshRequired',
  'InvalidToken',
  'InvalidSecurity',
  'RequestTimeTooSkewed',
  'AuthorizationHeaderMalformed',
  'MissingSecurityHeader',
  'UnauthorizedAccess',
  'CredentialsProviderError', // the SDK found no credentials at all
])

/** 403 codes that are about the object, not the credentials. */
const NOT_ACCESS_403 = new Set(['InvalidObjectState', 'ObjectNotInActiveTierError'])

/** The names the SDK gives an error reply it could not read a code from. */
const UNNAMED = new Set(['Unknown', 'UnknownError', 'Error', 'Forbidden', 'Unauthorized'])

interface SdkErrorShape {
  name?: string
  message?: string
  code?: string
  $fault?: string
  $metadata?: { httpStatusCode?: number }
  $response?: { statusCode?: number; headers?: Record<string, string | undefined>; body?: unknown }
  $responseBodyText?: string
  cause?: unknown
  errors?: unknown[]
}

export function httpStatus(error: unknown): number | undefined {
  const e = error as SdkErrorShape | undefined
  return e?.$metadata?.httpStatusCode ?? e?.$response?.statusCode
}

function unnamed(error: SdkErrorShape, status: number | undefined): boolean {
  const name = error.name
  return name === undefined || name === '' || UNNAMED.has(name) || (status !== undefined && name === String(status))
}

/** The S3 error code of a refused authentication or authorization (`HTTP 403` without one), else undefined. */
export function accessRefusalCode(error: unknown): string | undefined {
  const e = error as SdkErrorShape | undefined
  if (!e || typeof e !== 'object') return undefined
  if (e.name && ACCESS_CODES.has(e.name)) return e.name
  const status = httpStatus(e)
  if (status !== 401 && status !== 403) return undefined
  if (e.name && NOT_ACCESS_403.has(e.name)) return undefined
  return unnamed(e, status) ? `HTTP ${status}` : (e.name as string)
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'EPIPE',
  'EAI_AGAIN',
])

export function isNetworkError(error: unknown): boolean {
  const e = error as SdkErrorShape | undefined
  if (!e) return false
  if (e.code && NETWORK_CODES.has(e.code)) return true
  if (e.name === 'TimeoutError') return true
  if (Array.isArray(e.errors) && e.errors.some(isNetworkError)) return true // AggregateError from happy eyeballs
  return e.cause !== undefined && e.cause !== error && isNetworkError(e.cause)
}

function header(error: SdkErrorShape, name: string): string | undefined {
  const headers = error.$response?.headers
  if (!headers || typeof headers !== 'object') return undefined
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) return String(v)
  return undefined
}

/** The reply body the SDK kept, as one short line (tags of an HTML page dropped); '' when there is none. */
function bodySnippet(error: SdkErrorShape): string {
  const raw =
    typeof error.$responseBodyText === 'string'
      ? error.$responseBodyText
      : typeof error.$response?.body === 'string'
        ? error.$response.body
        : ''
  const text = raw
    .replace(/<[^>]*>/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
  return text.length > 200 ? `${text.slice(0, 200)}…` : text
}

/**
 * Why the endpoint counts as unreachable, as the cause a StoreUnavailableError names, or undefined: a
 * connection failure, the gate's own reply about its upstream, or a 5xx that is not an S3 error reply (a body
 * the SDK cannot parse as XML, e.g. a proxy's plain-text 502, or none at all).
 */
export function unavailableCause(error: unknown): Error | undefined {
  const e = error as SdkErrorShape | undefined
  if (!e || typeof e !== 'object') return undefined
  const gate = header(e, GATE_UNREACHABLE_HEADER)
  if (gate !== undefined) return new Error(gate || 'the S3 server behind the conditional-write gate is unreachable')
  const status = httpStatus(e)
  if (status === undefined) return isNetworkError(e) ? (error as Error) : undefined
  if (status < 500) return undefined
  const serviceError = typeof e.$fault === 'string' && !unnamed(e, status)
  if (serviceError) return undefined // the S3 server itself answered with an error code: it is reachable
  const body = bodySnippet(e)
  const reason = `${status} ${STATUS_CODES[status] ?? ''}`.trim()
  return new Error(`HTTP ${reason} ${body ? `that is not an S3 reply: ${body}` : 'without an S3 error body'}`)
}

/** The first characters of an access key id, enough to tell which one, never all of it. */
export function accessKeyHint(accessKeyId: string | undefined): string | undefined {
  if (!accessKeyId) return undefined
  return `${accessKeyId.slice(0, Math.min(4, Math.floor(accessKeyId.length / 2)))}…`
}

/** The SDK's message, one line, without the access key id in full; '' for the SDK's placeholder. */
function detailOf(error: SdkErrorShape, accessKeyId: string | undefined): string {
  let text = (typeof error.message === 'string' ? error.message : '').split('\n')[0]?.trim() ?? ''
  if (text === 'UnknownError' || text.startsWith('@aws-sdk')) return ''
  if (error.name === 'SignatureDoesNotMatch' && text.startsWith('The request signature we calculated')) return '' // boilerplate
  if (accessKeyId && accessKeyId.length > 0) text = text.replaceAll(accessKeyId, accessKeyHint(accessKeyId) as string)
  return text.length > 300 ? `${text.slice(0, 300)}…` : text
}

/** The store's typed error for an SDK failure, or the failure itself when it is neither kind. */
export function classifyS3Error(error: unknown, context: S3ErrorContext): unknown {
  const cause = unavailableCause(error)
  if (cause) return new StoreUnavailableError(context.endpoint, cause)
  const code = accessRefusalCode(error)
  if (code) {
    const e = error as SdkErrorShape
    const status = httpStatus(e)
    const hint = accessKeyHint(context.accessKeyId)
    return new StoreAccessError(context.endpoint, context.bucket, {
      code,
      detail: detailOf(e, context.accessKeyId),
      ...(status === undefined ? {} : { httpStatus: status }),
      ...(context.operation === undefined ? {} : { operation: context.operation }),
      ...(hint === undefined ? {} : { accessKeyHint: hint }),
    })
  }
  return error
}
