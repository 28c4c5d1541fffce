// The statistics of an evaluation: per-task records reduced to success (overall and per family), the macro
// average over families, mean score, mean episode length and invalid-action rate, each with a 95% interval.
// Pure functions, so the activity, the CLI and the tests compute the same numbers.

/** z of a two-sided 95% normal interval. */
export const Z95 = 1.959963984540054

/** One evaluated task: one episode on the task of seed `seed`. */
export interface EvaluationTaskRecord {
  seed: number
  family: string
  success: boolean
  score: number
  /** Environment steps taken (= responses sampled). */
  steps: number
  /** Steps whose response did not parse as an admissible action. */
  invalidSteps: number
}

/** An estimate with its 95% interval; the bounds are null where the sample cannot give one (n = 0, or n = 1 for a mean). */
export interface Estimate {
  value: number
  low: number | null
  high: number | null
  /** Observations behind it: tasks (steps for the invalid rate, families for the macro average). */
  n: number
}

export interface FamilyAggregate {
  tasks: number
  success: Estimate
}

export interface EvaluationAggregates {
  tasks: number
  /** Success over all tasks (Wilson score interval). */
  success: Estimate
  perFamily: Record<string, FamilyAggregate>
  /** Mean of the per-family success rates; interval from the per-family binomial variances. */
  macroSuccess: Estimate
  /** Mean episode score (normal approximation). */
  score: Estimate
  /** Mean episode length in steps (normal approximation). */
  length: Estimate
  /** Invalid steps / steps; interval of a ratio estimator with episodes as clusters (delta method). */
  invalidRate: Estimate
}

const clamp01 = (x: number) => Math.min(1, Math.max(0, x))

/** Wilson score interval of `successes` out of `n` at 95%. */
export function wilson(successes: number, n: number): Estimate {
  if (n === 0) return { value: 0, low: null, high: null, n }
  const p = successes / n
  const z2 = Z95 * Z95
  const centre = (p + z2 / (2 * n)) / (1 + z2 / n)
  const half = (Z95 / (1 + z2 / n)) * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))
  return { value: p, low: clamp01(centre - half), high: clamp01(centre + half), n }
}

/** Mean with a normal-approximation interval: mean ± z · s / √n, s the sample standard deviation (n − 1). */
export function meanInterval(values: readonly number[]): Estimate {
  const n = values.length
  if (n === 0) return { value: 0, low: null, high: null, n }
  const mean = values.reduce((a, b) => a + b, 0) / n
  if (n === 1) return { value: mean, low: null, high: null, n }
  const variance = values.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1)
  const half = Z95 * Math.sqrt(variance / n)
  return { value: mean, low: mean - half, high: mean + half, n }
}

/**
 * Mean of per-family success rates p_f (over F families with n_f tasks each): Var = Σ p_f (1 − p_f) / n_f / F²,
 * the normal interval clipped to [0, 1]. A family at 0% or 100% adds no variance (the plug-in estimate).
 */
export function macroInterval(families: readonly { successes: number; tasks: number }[]): Estimate {
  const used = families.filter((f) => f.tasks > 0)
  const F = used.length
  if (F === 0) return { value: 0, low: null, high: null, n: 0 }
  const rates = used.map((f) => f.successes / f.tasks)
  const value = rates.reduce((a, b) => a + b, 0) / F
  const variance = used.reduce((a, f, i) => a + (rates[i]! * (1 - rates[i]!)) / f.tasks, 0) / (F * F)
  const half = Z95 * Math.sqrt(variance)
  return { value, low: clamp01(value - half), high: clamp01(value + half), n: F }
}

/**
 * Ratio R = Σ a_i / Σ b_i over episodes i (invalid steps over steps). Steps of one episode are not independent,
 * so the variance is the delta method's with episodes as clusters: Var(R) ≈ Σ (a_i − R b_i)² / (m (m − 1) b̄²),
 * m episodes, b̄ the mean of b. `n` of the estimate is Σ b_i. At R = 0 or 1, the Wilson interval over episodes.
 */
export function ratioInterval(pairs: readonly { a: number; b: number }[]): Estimate {
  const m = pairs.length
  const A = pairs.reduce((s, p) => s + p.a, 0)
  const B = pairs.reduce((s, p) => s + p.b, 0)
  if (B === 0) return { value: 0, low: null, high: null, n: 0 }
  const R = A / B
  if (m < 2) return { value: R, low: null, high: null, n: B }
  // at 0 or 1 every term is 0 and the delta method claims certainty; bound it instead as if each episode were
  // one observation (Wilson over m, wider than any bound over the steps)
  if (A === 0 || A === B) return { ...wilson(A === 0 ? 0 : m, m), value: R, n: B }
  const bBar = B / m
  const variance = pairs.reduce((s, p) => s + (p.a - R * p.b) ** 2, 0) / (m * (m - 1) * bBar * bBar)
  const half = Z95 * Math.sqrt(variance)
  return { value: R, low: clamp01(R - half), high: clamp01(R + half), n: B }
}

/** Every aggregate of a set of task records (families in order of first appearance). */
export function aggregateEvaluation(records: readonly EvaluationTaskRecord[]): EvaluationAggregates {
  const families = new Map<string, { successes: number; tasks: number }>()
  for (const r of records) {
    const f = families.get(r.family) ?? { successes: 0, tasks: 0 }
    f.tasks++
    if (r.success) f.successes++
    families.set(r.family, f)
  }
  return {
    tasks: records.length,
    success: wilson(records.filter((r) => r.success).length, records.length),
    perFamily: Object.fromEntries(
      [...families].map(([name, f]) => [name, { tasks: f.tasks, success: wilson(f.successes, f.tasks) }]),
    ),
    macroSuccess: macroInterval([...families.values()]),
    score: meanInterval(records.map((r) => r.score)),
    length: meanInterval(records.map((r) => r.steps)),
    invalidRate: ratioInterval(records.map((r) => ({ a: r.invalidSteps, b: r.steps }))),
  }
}
