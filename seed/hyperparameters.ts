// Hyperparameter overrides of a running run (`setHyperparameters`, `retryIteration`): which fields may change,
// how overrides combine with the run configuration, and their validation with every bad field path. Pure: the
// workflows validate an override before they accept it.
import { z } from 'zod'
import { parseRunConfig, Stage2Schema } from './config.ts'

/**
 * Stage 2's settings, less those the run plan is derived from (iterations, tasks per step and group size fix the
 * iteration count and the shards) and the analyzer's prompt sizes. Every field optional; unknown fields rejected.
 */
const Stage2Overrides = Stage2Schema.omit({ iterations: true, tasksPerStep: true, groupSize: true, analyzer: true })
  .partial()
  .strict()

export const HyperparameterOverridesSchema = z.object({ stage2: Stage2Overrides }).partial().strict()

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
  'cannot change during a run (stage2 settings can, except iterations, tasksPerStep, groupSize and analyzer)'

const dotted = (path: readonly PropertyKey[]) => (path.length > 0 ? path.map(String).join('.') : '(root)')

/**
 * Checks `next` on top of the run's `config` (as given) and the overrides already applied: the shape first (only
 * the fields of HyperparameterOverridesSchema), then the whole effective config against the run schema, so a
 * cross-field rule (mini-batch larger than an iteration) is reported too. Problems as `path: reason`.
 */
export function checkOverrides(config: unknown, applied: HyperparameterOverrides, next: unknown): CheckedOverrides {
  const parsed = HyperparameterOverridesSchema.safeParse(next ?? {})
  if (!parsed.success) {
    return {
      ok: false,
      problems: parsed.error.issues.flatMap((i) =>
        i.code === 'unrecognized_keys'
          ? i.keys.map((k) => `${dotted([...i.path, k])}: ${NOT_CHANGEABLE}`)
          : [`${dotted(i.path)}: ${i.message}`],
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
