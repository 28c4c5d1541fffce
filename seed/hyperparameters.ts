// Hyperparameter overrides of a running run (`setHyperparameters`, `retryIteration`): which fields may change,
// how overrides combine with the run configuration, and their validation with every bad field path. Pure: the
// workflows validate an override before they accept it.
import { z } from 'zod'
import { parseRunConfig, RunConfigSchema, Stage2Schema } from './config.ts'
import { boundProblems, dottedPath, fieldsAt, unknownFieldProblem } from './config-problems.ts'

/**
 * Stage 2's settings, less those the run plan is derived from (iterations, tasks per step and group size fix the
 * iteration count and the shards) and the analyzer's prompt sizes. Every field optional; unknown fields rejected.
 * A field's default is left out (an override that does not name a field must not reset it to its default).
 */
const Stage2Overrides = z
  .strictObject(
    Object.fromEntries(
      Object.entries(
        Stage2Schema.omit({ iterations: true, tasksPerStep: true, groupSize: true, analyzer: true }).shape,
      ).map(([name, field]) => [name, field instanceof z.ZodDefault ? field.unwrap() : field]),
    ) as unknown as { [K in keyof Stage2Fields]: z.ZodType<Stage2Fields[K]> },
  )
  .partial()

type Stage2Fields = Omit<z.output<typeof Stage2Schema>, 'iterations' | 'tasksPerStep' | 'groupSize' | 'analyzer'>

/** Of Stage 1, only what decides whether its annotation suffices (a retry may accept fewer annotated trajectories). */
const Stage1Overrides = z.strictObject({ minAnnotatedShare: z.number().min(0).max(1) }).partial()

export const HyperparameterOverridesSchema = z
  .object({ stage1: Stage1Overrides, stage2: Stage2Overrides })
  .partial()
  .strict()

export type HyperparameterOverrides = z.infer<typeof HyperparameterOverridesSchema>

type Plain = Record<string, unknown>

const isPlain = (v: unknown): v is Plain => typeof v === 'object' && v !== null && !Array.isArray(v)

/** `over` laid onto `base`, object by object (arrays and scalars replaced); neither is changed. */
export function deepMerge(base: unknown, over: unknown): unknown {
  if (!isPlain(base) || !isPlain(over)) return over === undefined ? base : over
  const out: Plain = { ...base }
  for (const [key, value] of Object.entries(over)) out[key] = deepMerge(base[key], value)
  return out
}

export type CheckedOverrides =
  | {
      ok: true
      /** The override as given, parsed. */
      overrides: HyperparameterOverrides
      /** Every override of the run so far, this one last: what the effective config adds to the run's. */
      cumulative: HyperparameterOverrides
    }
  | { ok: false; problems: string[] }

const NOT_CHANGEABLE =
  'cannot change during a run (stage2 settings can, except iterations, tasksPerStep, groupSize and analyzer; ' +
  'of stage1, minAnnotatedShare)'

/**
 * An override key the overrides schema does not know: `unknown field` (with a suggestion where one is close)
 * where the run configuration has no such field, else `cannot change during a run` at the deepest field given
 * (`model.hiddenSize`, not `model`).
 */
function unchangeable(input: unknown, path: readonly PropertyKey[], key: string, value: unknown): string[] {
  if (!fieldsAt(RunConfigSchema, input, path).includes(key))
    return [unknownFieldProblem(RunConfigSchema, input, path, key)]
  const at = [...path, key]
  if (isPlain(value) && Object.keys(value).length > 0 && fieldsAt(RunConfigSchema, input, at).length > 0)
    return Object.entries(value).flatMap(([k, v]) => unchangeable(input, at, k, v))
  return [`${dottedPath(at)}: ${NOT_CHANGEABLE}`]
}

/** The value at `path` in `value` (undefined where the path leads nowhere). */
function valueAt(value: unknown, path: readonly PropertyKey[]): unknown {
  let v = value
  for (const part of path) v = isPlain(v) && Object.hasOwn(v, part) ? v[part as string] : undefined
  return v
}

/**
 * Checks `next` on top of the run's `config` (as given) and the overrides already applied: the shape first (only
 * the fields of HyperparameterOverridesSchema; a field the run configuration does not have is an unknown field,
 * one it has but that may not change is refused as such), then the whole effective config against the run
 * schema, so a cross-field rule (mini-batch larger than an iteration) is reported too. Problems as `path: reason`,
 * bounded as parseRunConfig bounds them.
 */
export function checkOverrides(config: unknown, applied: HyperparameterOverrides, next: unknown): CheckedOverrides {
  const given = next ?? {}
  const parsed = HyperparameterOverridesSchema.safeParse(given)
  if (!parsed.success) {
    const merged = deepMerge(config, given)
    return {
      ok: false,
      problems: boundProblems(
        parsed.error.issues.flatMap((i) =>
          i.code === 'unrecognized_keys'
            ? i.keys.flatMap((k) => unchangeable(merged, i.path, k, valueAt(given, [...i.path, k])))
            : [`${dottedPath(i.path)}: ${i.message}`],
        ),
      ),
    }
  }
  const cumulative = deepMerge(applied, parsed.data) as HyperparameterOverrides
  const effective = parseRunConfig(deepMerge(config, cumulative))
  if (!effective.ok) return { ok: false, problems: effective.problems }
  return { ok: true, overrides: parsed.data, cumulative }
}

/** The run's configuration with its overrides: what the activities of a changed run read and hash. */
export function effectiveConfig(config: unknown, cumulative: HyperparameterOverrides): unknown {
  return deepMerge(config, cumulative)
}
