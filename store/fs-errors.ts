// The folder store's disk and permission failures as typed store errors (StoreFullError, StorePermissionError):
// a plain `ENOSPC` names no key, folder or store, and the operator needs all three and what to do.
import { dirname } from 'node:path'
import { StoreFullError, StorePermissionError } from './errors.ts'

const FULL = new Set(['ENOSPC', 'EDQUOT'])
const REFUSED = new Set(['EACCES', 'EPERM', 'EROFS'])

/**
 * `error` as the store's typed error when it is a full disk or a refused permission; otherwise `error` itself.
 * `path` is where the store was working (the folder named is the failing call's, when the error carries it).
 */
export function typedFsError(
  error: unknown,
  where: { key: string; path: string; store: string; operation: 'read' | 'write' },
): unknown {
  const e = error as { code?: unknown; path?: unknown } | null
  const code = typeof e?.code === 'string' ? e.code : undefined
  if (code === undefined || !(FULL.has(code) || REFUSED.has(code))) return error
  const path = typeof e?.path === 'string' ? e.path : where.path
  const folder = dirname(path)
  if (FULL.has(code)) return new StoreFullError(where.key, folder, where.store, code, error)
  return new StorePermissionError(where.key, path, where.store, code, where.operation, error)
}
