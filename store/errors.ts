/** A key that the store refuses: `..`, absolute paths, control characters, empty segments. */
export class InvalidKeyError extends Error {
  override name = 'InvalidKeyError'
  constructor(
    readonly key: string,
    reason: string,
  ) {
    super(`invalid artifact key ${JSON.stringify(key)}: ${reason}`)
  }
}

export class NotFoundError extends Error {
  override name = 'NotFoundError'
  constructor(
    readonly key: string,
    where: string,
  ) {
    super(`artifact not found: ${key} (in ${where})`)
  }
}

/** The bytes read do not hash to the sha256 recorded when the object was written. */
export class IntegrityError extends Error {
  override name = 'IntegrityError'
  constructor(
    readonly key: string,
    readonly expected: string | undefined,
    readonly actual: string | undefined,
    detail = '',
  ) {
    super(
      `integrity check failed for ${key}: recorded sha256 ${expected ?? '(none)'}, read sha256 ${actual ?? '(not computed)'}` +
        (detail ? ` (${detail})` : ''),
    )
  }
}

/**
 * What reading a stored object throws when the object itself is damaged, not the store: bytes that fail the
 * store's check, an object listed a moment ago and gone now, bytes that are not the JSON they should be (getJson).
 */
export function isDamagedObject(error: unknown): error is Error {
  return error instanceof IntegrityError || error instanceof NotFoundError || error instanceof SyntaxError
}

/** The backing service cannot be reached: names the endpoint so the operator knows what to start. */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError'
  constructor(
    readonly endpoint: string,
    cause: unknown,
  ) {
    super(`artifact store unreachable at ${endpoint}: ${describeCause(cause)}`, { cause })
  }
}

function describeCause(cause: unknown): string {
  if (cause instanceof Error) {
    const code = (cause as { code?: string }).code
    return code && !cause.message.includes(code) ? `${code} ${cause.message}` : cause.message || cause.name
  }
  return String(cause)
}

/** What refused the store's request, for StoreAccessError: the server's error code and where it happened. */
export interface AccessRefusal {
  /** The S3 error code (SignatureDoesNotMatch, AccessDenied, …), `HTTP 403` for a reply without a body. */
  code: string
  httpStatus?: number
  /** The request, e.g. `HeadObject runs/r/run.json`. */
  operation?: string
  /** The server's message, with the access key id shortened; '' when it sent none. */
  detail: string
  /** The first characters of the access key id the request was signed with, never the whole id. */
  accessKeyHint?: string
}

/**
 * The store's credentials were refused (authentication or authorization): no retry can fix it. Names the
 * endpoint, the bucket and what the server said; never the secret, and only the start of the access key id.
 */
export class StoreAccessError extends Error {
  override name = 'StoreAccessError'
  readonly code: string
  readonly httpStatus: number | undefined
  constructor(
    readonly endpoint: string,
    readonly bucket: string,
    refusal: AccessRefusal,
  ) {
    const status = refusal.httpStatus && !refusal.code.startsWith('HTTP ') ? `HTTP ${refusal.httpStatus}` : ''
    const where = [refusal.code, status, refusal.operation ?? ''].filter(Boolean).join(', ')
    const key = refusal.accessKeyHint ? `; access key id ${refusal.accessKeyHint}` : ''
    const said = refusal.detail
      ? `; ${refusal.httpStatus === undefined ? 'the SDK' : 'the server'} says: ${refusal.detail}`
      : ''
    super(
      `artifact store at ${endpoint} refused access to bucket ${bucket}: ${explainRefusal(refusal.code)} (${where})${key}${said}`,
    )
    this.code = refusal.code
    this.httpStatus = refusal.httpStatus
  }
}

function explainRefusal(code: string): string {
  switch (code) {
    case 'SignatureDoesNotMatch':
      return 'the request signature does not match: the secret access key is wrong for this access key id'
    case 'InvalidAccessKeyId':
    case 'XAdminUserNotFound': // versitygw's answer (a 404) for an access key id it has no user for
      return 'the server does not know this access key id'
    case 'AccessDenied':
    case 'AllAccessDisabled':
      return 'access denied: these credentials may not do this on the bucket'
    case 'ExpiredToken':
    case 'TokenRefreshRequired':
      return 'the session token has expired'
    case 'InvalidToken':
      return 'the session token is invalid'
    case 'RequestTimeTooSkewed':
      return "this machine's clock is too far from the server's for the signature to be accepted"
    case 'CredentialsProviderError':
      return 'no credentials found (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or an instance role)'
    default:
      return code.startsWith('HTTP ')
        ? 'the credentials were refused (a reply without a body: a wrong secret, an unknown access key id or no permission)'
        : 'the credentials were refused'
  }
}

/** The store's identity record exists but cannot be read as one: the store cannot say which store it is. */
export class StoreIdentityError extends Error {
  override name = 'StoreIdentityError'
  constructor(
    readonly where: string,
    reason: string,
  ) {
    super(
      `the artifact store's identity record ${where} is damaged: ${reason}; restore it from a backup of this ` +
        'store (deleting it gives the store a new id, which runs recorded with the old one do not accept)',
    )
  }
}

/** The folder store's disk is full (ENOSPC) or the user's quota on it is spent (EDQUOT). */
export class StoreFullError extends Error {
  override name = 'StoreFullError'
  constructor(
    readonly key: string,
    readonly folder: string,
    readonly store: string,
    readonly code: string,
    cause?: unknown,
  ) {
    const what = code === 'EDQUOT' ? 'the disk quota is exceeded' : 'no space left on the device'
    const fix = code === 'EDQUOT' ? 'free space or raise the quota' : 'free space on that disk'
    super(
      `cannot write ${key} to the artifact store ${store}: ${what} (${code}) in ${folder}; ${fix} ` +
        '(or move the store, docs/operations.md "Backing up and moving a store"), then retry the run',
      { cause },
    )
  }
}

/** The folder store may not read or write a path: permission denied (EACCES, EPERM) or a read-only disk (EROFS). */
export class StorePermissionError extends Error {
  override name = 'StorePermissionError'
  constructor(
    readonly key: string,
    readonly path: string,
    readonly store: string,
    readonly code: string,
    readonly operation: 'read' | 'write',
    cause?: unknown,
  ) {
    const what = code === 'EROFS' ? 'the file system is read-only' : 'permission denied'
    const fix =
      code === 'EROFS'
        ? 'remount it read-write or point SEEDFLOW_ARTIFACTS_DIR at a writable copy of the store'
        : `give the user running seedflow${userHint()} ${operation === 'read' ? 'read' : 'read and write'} access to the store's folders (chown or chmod)`
    super(
      `cannot ${operation} ${key} in the artifact store ${store}: ${what} (${code}) at ${path}; ${fix}, then retry`,
      {
        cause,
      },
    )
  }
}

function userHint(): string {
  const uid = typeof process.getuid === 'function' ? process.getuid() : undefined
  return uid === undefined ? '' : ` (uid ${uid})`
}
