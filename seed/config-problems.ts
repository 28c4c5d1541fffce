// The problems of a refused configuration, as an operator reads them: `path: reason`, the path dotted
// (`stage2.lr`), an unknown field with the closest real one (`stage2.lrr: unknown field (did you mean
// stage2.lr?)`), every line bounded and their number too, so a refusal never echoes a huge value. Pure (the
// workflows refuse their input with it); reads zod schemas through their public definitions.
import { bounded } from '../infra/bounded-text.ts'

/** Longest line of a refusal before it is cut (`… (N more characters cut)`). */
export const MAX_PROBLEM_LENGTH = 300
/** Most problems a refusal lists; the rest are counted in a last line. */
export const MAX_PROBLEMS = 50

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/
/** Longest key a path shows whole; a longer one is cut (a real field's name is far shorter). */
const MAX_KEY_SHOWN = 64

/**
 * A field path as problems name it: `stage2.lr`; a key that is not a plain name is quoted (`foo["a b"]`), an
 * array index bracketed (`foo[3]`); `(root)` for the whole object.
 */
export function dottedPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '(root)'
  let out = ''
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`
    else if (typeof part === 'string' && IDENTIFIER.test(part) && part.length <= MAX_KEY_SHOWN)
      out += out === '' ? part : `.${part}`
    else {
      const key = String(part)
      out +=
        key.length <= MAX_KEY_SHOWN
          ? `[${JSON.stringify(key)}]`
          : `[${JSON.stringify(key.slice(0, MAX_KEY_SHOWN))}… (${key.length} characters)]`
    }
  }
  return out
}

/** Every line bounded, at most MAX_PROBLEMS of them (a last line counts the rest). */
export function boundProblems(problems: readonly string[]): string[] {
  const shown = problems.slice(0, MAX_PROBLEMS).map((p) => bounded(p, MAX_PROBLEM_LENGTH))
  if (problems.length > MAX_PROBLEMS) shown.push(`… and ${problems.length - MAX_PROBLEMS} more problems`)
  return shown
}

interface SchemaDef {
  type: string
  innerType?: SchemaNode
  in?: SchemaNode
  shape?: Record<string, SchemaNode>
  options?: SchemaNode[]
  discriminator?: string
  values?: unknown[]
}
interface SchemaNode {
  _zod: { def: SchemaDef }
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

/** The schema under its wrappers (optional, nullable, default, …). */
function unwrap(schema: SchemaNode): SchemaNode {
  let s = schema
  for (;;) {
    const def = s._zod.def
    if (
      def.innerType &&
      ['optional', 'nullable', 'default', 'prefault', 'readonly', 'nonoptional', 'catch'].includes(def.type)
    )
      s = def.innerType
    else if (def.type === 'pipe' && def.in) s = def.in
    else return s
  }
}

/** An object schema, or the member of a discriminated union that `value` names (by its discriminator). */
function objectOf(schema: SchemaNode, value: unknown): Record<string, SchemaNode> | undefined {
  const def = unwrap(schema)._zod.def
  if (def.type === 'object') return def.shape
  if (def.type === 'union' && def.options) {
    const key = def.discriminator
    const tag = key !== undefined && isPlainObject(value) ? value[key] : undefined
    const member = def.options.find((o) => {
      const literal = key === undefined ? undefined : objectOf(o, undefined)?.[key]
      return literal !== undefined && (unwrap(literal)._zod.def.values ?? []).includes(tag)
    })
    return member ? objectOf(member, value) : undefined
  }
  return undefined
}

/**
 * The field names the schema has at `path` in `input` (a union member chosen by the input's discriminator);
 * empty where the path is no object of the schema.
 */
export function fieldsAt(schema: unknown, input: unknown, path: readonly PropertyKey[]): string[] {
  let node = schema as SchemaNode
  let value = input
  for (const part of path) {
    const shape = objectOf(node, value)
    const next = typeof part === 'string' && shape && Object.hasOwn(shape, part) ? shape[part] : undefined
    if (!next) return []
    node = next
    value = isPlainObject(value) ? value[part as string] : undefined
  }
  return Object.keys(objectOf(node, value) ?? {})
}

/** Optimal string alignment distance (insertions, deletions, substitutions, adjacent transpositions). */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [Array.from({ length: b.length + 1 }, (_, j) => j)]
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let d = Math.min((rows[i - 1]?.[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (rows[i - 1]?.[j - 1] ?? 0) + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, (rows[i - 2]?.[j - 2] ?? 0) + 1)
      row.push(d)
    }
    rows.push(row)
  }
  return rows[a.length]?.[b.length] ?? 0
}

/**
 * The known field closest to `key`, when it is genuinely close: the same ignoring case, or a few edits away
 * (one for names up to 5 characters, two up to 8, three beyond), and not most of the name.
 */
export function closestField(key: string, fields: readonly string[]): string | undefined {
  const lower = key.toLowerCase()
  const limit = lower.length <= 5 ? 1 : lower.length <= 8 ? 2 : 3
  let best: string | undefined
  let bestDistance = Number.POSITIVE_INFINITY
  for (const field of fields) {
    const candidate = field.toLowerCase()
    if (Math.abs(candidate.length - lower.length) > limit) continue
    const d = editDistance(lower, candidate)
    if (d <= limit && d < candidate.length && d < bestDistance) {
      best = field
      bestDistance = d
    }
  }
  return best
}

/** `path.key: unknown field`, with the closest known field of the same object where one is close. */
export function unknownFieldProblem(
  schema: unknown,
  input: unknown,
  path: readonly PropertyKey[],
  key: string,
): string {
  const suggestion = closestField(key, fieldsAt(schema, input, path))
  const hint = suggestion === undefined ? '' : ` (did you mean ${dottedPath([...path, suggestion])}?)`
  return `${dottedPath([...path, key])}: unknown field${hint}`
}

interface Issue {
  code: string
  path: PropertyKey[]
  message: string
  keys?: string[]
  expected?: string
}

/** The value at `path` in `input` (undefined where the path leads nowhere). */
function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input
  for (const part of path) {
    if (typeof value !== 'object' || value === null || !Object.hasOwn(value, part)) return undefined
    value = (value as Record<PropertyKey, unknown>)[part]
  }
  return value
}

/** zod's issues as bounded `path: reason` lines: one per unknown field, a missing field said so. */
export function issueProblems(schema: unknown, input: unknown, issues: readonly Issue[]): string[] {
  const lines = issues.flatMap((issue) => {
    if (issue.code === 'unrecognized_keys')
      return (issue.keys ?? []).map((key) => unknownFieldProblem(schema, input, issue.path, key))
    if (issue.path.length > 0 && valueAt(input, issue.path) === undefined) {
      if (issue.code === 'invalid_type')
        return [`${dottedPath(issue.path)}: missing (expected ${issue.expected ?? 'a value'})`]
      return [`${dottedPath(issue.path)}: missing; ${issue.message}`]
    }
    return [`${dottedPath(issue.path)}: ${issue.message}`]
  })
  return boundProblems(lines)
}

/** `path: unknown field (did you mean …?)` for each key of the object `input` that is not one of `fields`. */
export function unknownKeyProblems(input: unknown, fields: readonly string[]): string[] {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return []
  return Object.keys(input)
    .filter((key) => !fields.includes(key))
    .map((key) => {
      const suggestion = closestField(key, fields)
      return `${dottedPath([key])}: unknown field${suggestion ? ` (did you mean ${suggestion}?)` : ''}`
    })
}

/** The problem of a workflow input whose run id is not the workflow id (the given id bounded), else none. */
export function runIdProblems(runId: unknown, workflowId: string): string[] {
  if (runId === workflowId) return []
  return [
    `runId: ${bounded(JSON.stringify(runId) ?? 'undefined', 200)} differs from the workflow id ${JSON.stringify(workflowId)}`,
  ]
}
