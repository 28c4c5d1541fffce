// The two figures the side-by-side benchmarks report of repeated timings: the minimum and the median (the upper
// middle one for an even count), with every value kept.
export function minMedian(xs: readonly number[]): { min: number; median: number; all: number[] } {
  const sorted = [...xs].sort((a, b) => a - b)
  return { min: sorted[0] as number, median: sorted[Math.floor(sorted.length / 2)] as number, all: [...xs] }
}
