// Malformed run configurations for the fuzz tests (unit tier: test/seed/config-fuzz.test.ts; integration tier:
// test/integration/workflow-start-invalid.test.ts): a valid base (the CPU sokoban preset, or the same with an
// imported model folder) with one to three mutations from a seeded PRNG, each naming the field path a refusal must
// report. The mutations follow the schema (RunConfigSchema walked by its public zod classes) so that every one is
// invalid on its own: unknown fields at every depth, missing required fields, wrong types, numbers out of range
// (negative, beyond the maximum, non-integers, huge), huge strings, values nested 1000 deep, arrays where objects
// are expected, null. Every generated config survives a JSON round trip (no NaN, no Infinity).
import { z } from 'zod'
import { type RunConfig, RunConfigSchema, runConfig } from '../../seed/config.ts'
import { dottedPath } from '../../seed/config-problems.ts'
import { cpuSokobanPreset } from '../../seed/presets/cpu.ts'

export type FieldPath = (string | number)[]

export interface MalformedConfig {
  /** Position in the generated list. */
  index: number
  /** The mutation classes applied (one per mutation). */
  kinds: MutationKind[]
  /** What was done, one entry per mutation: `stage2.lr: negative number -3`. */
  description: string[]
  /**
   * The field paths a refusal must name, one per mutation: the mutated field, or the new unknown field (an empty
   * path: the root itself was replaced). A problem names a path when it starts with it (the path or below).
   */
  paths: FieldPath[]
  config: unknown
}

export type MutationKind =
  | 'unknown-field'
  | 'missing-field'
  | 'wrong-type'
  | 'out-of-range'
  | 'step-cap'
  | 'huge-string'
  | 'deep-nesting'
  | 'array-for-object'
  | 'null'
  | 'root'

/** Whether a problem line (`path: reason`) is about `path`: the path itself or a field below it. */
export function namesPath(problem: string, path: FieldPath): boolean {
  if (path.length === 0) return problem.startsWith('(root): ')
  const p = dottedPath(path)
  return problem.startsWith(`${p}: `) || problem.startsWith(`${p}.`) || problem.startsWith(`${p}[`)
}

/** The valid bases the mutations start from (the test checks that each parses). */
export function baseConfigs(): { builtin: RunConfig; imported: RunConfig } {
  const builtin = cpuSokobanPreset('seed')
  const imported = runConfig({
    ...builtin,
    model: { kind: 'imported', folder: '/models/qwen2.5-0.5b', maxPositions: 1024 },
    warmstart: null,
    stage1: { ...builtin.stage1, actingData: 'rollouts' },
  })
  return { builtin, imported }
}

/** mulberry32: a small, seeded, deterministic PRNG in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** The length of the longest generated string: 1.5 MiB, the size that once passed as a model folder. */
export const HUGE_STRING_LENGTH = 1_572_864

type Schema = z.ZodType

/** A place in the base config: its path, its (unwrapped) schema, whether null or absence is allowed. */
interface Site {
  path: FieldPath
  schema: Schema
  nullable: boolean
  /** Absent is fine (a default applies). */
  optional: boolean
  value: unknown
}

function unwrap(schema: Schema): { schema: Schema; nullable: boolean; optional: boolean } {
  let s = schema
  let nullable = false
  let optional = false
  for (;;) {
    if (s instanceof z.ZodNullable) {
      nullable = true
      s = s.unwrap() as Schema
    } else if (s instanceof z.ZodOptional) {
      optional = true
      s = s.unwrap() as Schema
    } else if (s instanceof z.ZodDefault || s instanceof z.ZodPrefault) {
      optional = true
      s = s.def.innerType as Schema
    } else return { schema: s, nullable, optional }
  }
}

/** The object schema of `schema` for `value` (a discriminated union's member by the value's `kind`). */
function objectShape(schema: Schema, value: unknown): Record<string, Schema> | undefined {
  if (schema instanceof z.ZodObject) return schema.shape as Record<string, Schema>
  if (schema instanceof z.ZodDiscriminatedUnion) {
    const kind = (value as { kind?: unknown } | null)?.kind
    for (const option of schema.options as Schema[]) {
      const shape = objectShape(option, undefined)
      const literal = shape?.kind
      if (literal instanceof z.ZodLiteral && literal.values.has(kind as never)) return shape
    }
  }
  return undefined
}

const isPlain = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/** Every place of the base config, the root first. */
function sitesOf(base: unknown): Site[] {
  const out: Site[] = []
  const walk = (schema: Schema, value: unknown, path: FieldPath, nullable: boolean, optional: boolean) => {
    out.push({ path, schema, nullable, optional, value })
    const shape = objectShape(schema, value)
    if (!shape || !isPlain(value)) return
    for (const [key, field] of Object.entries(shape)) {
      const u = unwrap(field)
      walk(u.schema, value[key], [...path, key], u.nullable, u.optional)
    }
  }
  walk(RunConfigSchema as Schema, base, [], false, false)
  return out
}

/** An object of the schema that the base has (not a null warm-start). */
const isObjectSite = (s: Site) => objectShape(s.schema, s.value) !== undefined && isPlain(s.value)

/** `value` nested `depth` deep: `{ a: { a: … value } }` or `[[… value]]`. */
function nested(depth: number, asArray: boolean, value: unknown): unknown {
  let v = value
  for (let i = 0; i < depth; i++) v = asArray ? [v] : { a: v }
  return v
}

/** Sets `key` as an own, enumerable property (so `__proto__` is a key, not the prototype). */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
}

function parentOf(root: { value: unknown }, path: FieldPath): Record<string, unknown> {
  let v: unknown = root.value
  for (const part of path.slice(0, -1)) v = (v as Record<string, unknown>)[part as string]
  return v as Record<string, unknown>
}

/** Replaces the value at `path` (the root when empty). */
function put(root: { value: unknown }, path: FieldPath, value: unknown): void {
  if (path.length === 0) root.value = value
  else setOwn(parentOf(root, path), path[path.length - 1] as string, value)
}

const show = dottedPath

class Generator {
  constructor(readonly random: () => number) {}

  int(n: number): number {
    return Math.floor(this.random() * n)
  }

  pick<T>(items: readonly T[]): T {
    const item = items[this.int(items.length)]
    if (item === undefined) throw new Error('pick from nothing')
    return item
  }

  word(): string {
    const letters = 'abcdefghijklmnopqrstuvwxyz'
    let w = ''
    for (let i = 0, n = 3 + this.int(8); i < n; i++) w += letters[this.int(letters.length)]
    return w
  }

  /** A near miss of a real key: one character dropped, doubled, swapped or changed in case. */
  typo(key: string): string {
    const i = this.int(key.length)
    switch (this.int(4)) {
      case 0:
        return key.length > 1 ? key.slice(0, i) + key.slice(i + 1) : `${key}${key}`
      case 1:
        return key.slice(0, i + 1) + key.slice(i)
      case 2:
        return i + 1 < key.length ? key.slice(0, i) + key[i + 1] + key[i] + key.slice(i + 2) : `${key}s`
      default:
        return key.slice(0, i) + (key[i] as string).toUpperCase() + key.slice(i + 1) + (i === 0 ? 'X' : '')
    }
  }

  hugeString(): string {
    const length = this.random() < 0.1 ? HUGE_STRING_LENGTH : this.pick([4097, 5000, 20_000, 100_000])
    // `length` code points (what a length bound counts): a two-unit emoji counts once
    const unit = this.pick(['x', '/', 'é', '"\\\n', '😀'])
    return unit === '😀' ? unit.repeat(length) : unit.repeat(Math.ceil(length / unit.length)).slice(0, length)
  }

  /** A JSON value that is not of `type` (one of string, number, boolean, null, array, object). */
  otherType(not: string[]): unknown {
    const values: Array<[string, () => unknown]> = [
      ['string', () => this.pick(['1', 'true', '', 'many', 'null'])],
      ['number', () => this.pick([0, 1, -1, 2.5, 1e308])],
      ['boolean', () => this.random() < 0.5],
      ['null', () => null],
      ['array', () => this.pick([[], [1], [{}]])],
      ['object', () => ({ value: 1 })],
    ]
    return this.pick(values.filter(([t]) => !not.includes(t)))[1]()
  }

  /** Bad numbers for a number schema, each refused by the schema itself (range, integrality). */
  badNumbers(schema: z.ZodNumber, base: number): Array<[string, number]> {
    const out: Array<[string, number]> = []
    const min = schema.minValue ?? Number.NEGATIVE_INFINITY
    const max = schema.maxValue ?? Number.POSITIVE_INFINITY
    if (min >= 0) out.push(['negative', -1 - this.int(1000)], ['hugely negative', -1e308])
    if (Number.isFinite(max) && max < 1e300) out.push(['beyond the maximum', max + 1 + this.int(100)])
    if (schema.isInt) out.push(['not an integer', base + 0.5], ['beyond the safe integers', 1e308])
    return out
  }
}

interface Mutation {
  kind: MutationKind
  path: FieldPath
  description: string
  /** The top-level section it changes ('' for the root): combined mutations touch different sections. */
  section: string
  apply(root: { value: unknown }): void
  /** A cross-field rule: reported only when every field is valid on its own, so never combined. */
  crossField?: boolean
}

const STEP_CAP_PATHS: FieldPath[] = [
  ['stage1', 'maxEnvSteps'],
  ['stage2', 'maxEnvSteps'],
  ['evaluation', 'maxEnvSteps'],
]

function mutation(g: Generator, base: RunConfig, sites: Site[]): Mutation {
  const objects = sites.filter(isObjectSite)
  const nonRoot = sites.filter((s) => s.path.length > 0)
  const leaves = nonRoot.filter((s) => objectShape(s.schema, s.value) === undefined)
  const section = (path: FieldPath) => String(path[0] ?? '')
  const roll = g.random()
  if (roll < 0.22) {
    const site = g.pick(objects)
    const shape = objectShape(site.schema, site.value) ?? {}
    const known = Object.keys(shape)
    const style = g.random()
    let key: string
    if (style < 0.45) key = g.typo(g.pick(known))
    else if (style < 0.8) key = g.word()
    else key = g.pick(['__proto__', 'constructor', 'toString', 'a.b', '', ' ', 'ü', 'k'.repeat(5000), 'x: y\nz'])
    if (known.includes(key)) key = `${key}Extra`
    const value = g.otherType([])
    const path = [...site.path, key]
    return {
      kind: 'unknown-field',
      path,
      description: `${show(path)}: unknown field ${JSON.stringify(key.slice(0, 40))}`,
      section: section(path),
      apply: (root) => setOwn(parentOf(root, path), key, value),
    }
  }
  if (roll < 0.34) {
    const required = nonRoot.filter((s) => !s.optional)
    const site = g.pick(required)
    return {
      kind: 'missing-field',
      path: site.path,
      description: `${show(site.path)}: missing`,
      section: section(site.path),
      apply: (root) => {
        delete parentOf(root, site.path)[site.path[site.path.length - 1] as string]
      },
    }
  }
  if (roll < 0.5) {
    const site = g.pick(nonRoot)
    const s = site.schema
    const own =
      s instanceof z.ZodNumber
        ? ['number']
        : s instanceof z.ZodBoolean
          ? ['boolean']
          : s instanceof z.ZodEnum || s instanceof z.ZodLiteral || s instanceof z.ZodString
            ? ['string']
            : ['object']
    const value = g.otherType([...own, ...(site.nullable ? ['null'] : [])])
    return {
      kind: 'wrong-type',
      path: site.path,
      description: `${show(site.path)}: ${JSON.stringify(value)}`,
      section: section(site.path),
      apply: (root) => put(root, site.path, value),
    }
  }
  if (roll < 0.64) {
    const numbers = leaves.filter((s) => s.schema instanceof z.ZodNumber)
    const site = g.pick(numbers)
    const bad = g.badNumbers(site.schema as z.ZodNumber, site.value as number)
    const [what, value] = bad.length > 0 ? g.pick(bad) : ['a string', '1']
    return {
      kind: 'out-of-range',
      path: site.path,
      description: `${show(site.path)}: ${what} ${value}`,
      section: section(site.path),
      apply: (root) => put(root, site.path, value),
    }
  }
  if (roll < 0.67) {
    const path = g.pick(STEP_CAP_PATHS)
    const value = 16 + g.int(1000) // sokoban's cap is 15
    return {
      kind: 'step-cap',
      path,
      description: `${show(path)}: ${value} steps, beyond ${base.env}'s cap`,
      section: section(path),
      apply: (root) => put(root, path, value),
      crossField: true,
    }
  }
  if (roll < 0.77) {
    const strings = leaves.filter((s) => s.schema instanceof z.ZodString)
    const site = strings.length > 0 && g.random() < 0.5 ? g.pick(strings) : g.pick(leaves)
    const value = g.hugeString()
    return {
      kind: 'huge-string',
      path: site.path,
      description: `${show(site.path)}: a string of ${[...value].length} characters`,
      section: section(site.path),
      apply: (root) => put(root, site.path, value),
    }
  }
  if (roll < 0.86) {
    const site = g.pick(nonRoot)
    const asArray = g.random() < 0.4
    const value = nested(1000, asArray, g.pick([1, 'x', null, true]))
    return {
      kind: 'deep-nesting',
      path: site.path,
      description: `${show(site.path)}: ${asArray ? 'an array' : 'an object'} nested 1000 deep`,
      section: section(site.path),
      apply: (root) => put(root, site.path, value),
    }
  }
  if (roll < 0.93) {
    const site = g.pick(objects.filter((s) => s.path.length > 0))
    const value = g.random() < 0.5 ? [] : [structuredClone(site.value)]
    return {
      kind: 'array-for-object',
      path: site.path,
      description: `${show(site.path)}: an array`,
      section: section(site.path),
      apply: (root) => put(root, site.path, value),
    }
  }
  if (roll < 0.99) {
    const site = g.pick(nonRoot.filter((s) => !s.nullable))
    return {
      kind: 'null',
      path: site.path,
      description: `${show(site.path)}: null`,
      section: section(site.path),
      apply: (root) => put(root, site.path, null),
    }
  }
  const value = g.pick<unknown>([null, [], 42, 'config', [structuredClone(base)], true])
  return {
    kind: 'root',
    path: [],
    description: `(root): ${JSON.stringify(value).slice(0, 40)}`,
    section: '',
    apply: (root) => put(root, [], value),
  }
}

/**
 * `count` malformed configs from the PRNG seeded with `seed` (the same list every time): 80% with one mutation,
 * the rest with two or three in different top-level sections.
 */
export function malformedConfigs(count = 1000, seed = 16): MalformedConfig[] {
  const g = new Generator(prng(seed))
  const bases = baseConfigs()
  const siteLists = { builtin: sitesOf(bases.builtin), imported: sitesOf(bases.imported) }
  const out: MalformedConfig[] = []
  for (let index = 0; index < count; index++) {
    const which = g.random() < 0.25 ? 'imported' : 'builtin'
    const base = bases[which]
    const wanted = g.random() < 0.8 ? 1 : 2 + g.int(2)
    const chosen: Mutation[] = []
    for (let tries = 0; chosen.length < wanted && tries < 50; tries++) {
      const m = mutation(g, base, siteLists[which])
      const combinable = !m.crossField && m.kind !== 'root' && chosen.every((c) => !c.crossField && c.kind !== 'root')
      if (chosen.length === 0 || (combinable && chosen.every((c) => c.section !== m.section))) chosen.push(m)
    }
    const root = { value: structuredClone(base) as unknown }
    for (const m of chosen) m.apply(root)
    out.push({
      index,
      kinds: chosen.map((m) => m.kind),
      description: chosen.map((m) => `${which} base: ${m.description}`),
      paths: chosen.map((m) => m.path),
      config: root.value,
    })
  }
  return out
}

/**
 * About `n` of the generated configs for the slower entry points (a process or a workflow each): the first of
 * each mutation class in turn, then the next of each, and always one with a 1.5 MiB string.
 */
export function entryPointSample(n = 20, seed = 16): MalformedConfig[] {
  const all = malformedConfigs(1000, seed)
  // under Temporal's 2 MB payload limit (a 1.5 Mi-character emoji string is 6 MB of UTF-8)
  const fits = (c: MalformedConfig) => Buffer.byteLength(JSON.stringify(c.config)) < 1_800_000
  const huge = all.find((c) => fits(c) && c.description.some((d) => d.includes(`${HUGE_STRING_LENGTH} characters`)))
  const byKind = new Map<MutationKind, MalformedConfig[]>()
  for (const c of all) {
    const kind = c.kinds.length > 1 ? undefined : c.kinds[0]
    if (kind) byKind.set(kind, [...(byKind.get(kind) ?? []), c])
  }
  const out: MalformedConfig[] = huge ? [huge] : []
  for (let round = 0; out.length < n && round < 10; round++) {
    for (const list of byKind.values()) {
      const c = list.filter(fits)[round]
      if (c && out.length < n && !out.includes(c)) out.push(c)
    }
  }
  const combined = all.find((c) => c.kinds.length > 1 && fits(c))
  if (combined && out.length < n + 1 && !out.includes(combined)) out.push(combined)
  return out
}
