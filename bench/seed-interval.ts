// The mean over training seeds with its 95% Student's t interval, and how the reports print it (in points).
// Few seeds: not the normal interval of evaluation-stats.

/** Two-sided 95% quantiles of Student's t for 1 … 30 degrees of freedom. */
const T95 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11,
  2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
]

export interface MeanInterval {
  mean: number
  /** Half-width of the 95% t-interval over seeds; null with one seed. */
  half: number | null
  n: number
}

/** Mean over training seeds with Student's t interval (few seeds: not the normal interval of evaluation-stats). */
export function seedInterval(xs: readonly number[]): MeanInterval {
  const n = xs.length
  const mean = xs.reduce((a, b) => a + b, 0) / n
  if (n < 2) return { mean, half: null, n }
  const sd = Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (n - 1))
  return { mean, half: (T95[Math.min(n - 1, T95.length) - 1] ?? 1.96) * (sd / Math.sqrt(n)), n }
}

/** `mean ± half` in points ('–' for none; no ± with one seed). */
export const showInterval = (m: MeanInterval | null) =>
  m === null ? '–' : `${(100 * m.mean).toFixed(1)}${m.half === null ? '' : ` ± ${(100 * m.half).toFixed(1)}`}`
