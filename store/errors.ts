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
