// Which limit an environment's figures point to, where SEED's distillation term shows no gain (issue 20): signal
// strength, skill quality or analyzer erosion. Read from the upper bound (`seed-oracle`, whose teacher reads the
// environment's oracle skill instead of the analyzer's, paired with `seed[stage2.opdCoef=0]`) and the legs'
// per-iteration diagnostics. The rule is printed with the verdict, so a reader can check it against the figures.
import { type LegDiagnostics, mean } from './learning-diagnostics.ts'
import { type MeanInterval, showInterval } from './seed-interval.ts'

/** `row` − `other` over the seeds both have, with its 95% t-interval, as fractions. */
export interface SeedDifference extends MeanInterval {
  /** The seeds both rows have. */
  seeds: string[]
  /** Those of them whose two legs started from different warm-start checkpoints. */
  unpaired: string[]
}

export const UPPER_ROW = 'seed-oracle'
export const SEED_ROW = 'seed'
/** The override that turns the distillation term off, and the row that differs from `seed` in it alone. */
export const OPD_OFF = 'stage2.opdCoef=0'
export const OPD_OFF_ROW = `${SEED_ROW}[${OPD_OFF}]`

export interface LimitsInput {
  env: string
  split: string
  average: string
  /** `seed-oracle` − `seed[stage2.opdCoef=0]`: the distillation with correct skills. */
  upper: SeedDifference | null
  /** `seed` − `seed[stage2.opdCoef=0]`: the distillation with self-written skills. */
  distill: SeedDifference | null
  /** The environment's legs (every row; only the three above are read). */
  legs: readonly LegDiagnostics[]
  /** Names the start the rows share where a report holds two sets of rows (e.g. `from the skill-reading start`). */
  start?: string
}

const unpaired = (d: SeedDifference) =>
  d.unpaired.length === 0 ? '' : `; different warm-start checkpoints: seeds ${d.unpaired.join(', ')}`
const gains = (d: SeedDifference | null) => d !== null && d.half !== null && d.mean - d.half > 0

function range(xs: ReadonlyArray<number | null>, show: (x: number) => string): string {
  const v = xs.filter((x): x is number => x !== null)
  return v.length === 0 ? '–' : `${show(Math.min(...v))}–${show(Math.max(...v))}`
}

function expertAbove(legs: readonly LegDiagnostics[]): string {
  const above = legs.reduce((a, d) => a + d.expertAbove, 0)
  const all = legs.reduce((a, d) => a + d.withGaps, 0)
  return `${above} of ${all} iterations`
}

function erosion(legs: readonly LegDiagnostics[]): string {
  const read = legs.filter((d) => d.parseFirst !== null && d.parseLast !== null)
  if (read.length === 0) return 'no analyzer figures'
  if (read.every((d) => d.parseMax === 0))
    return `no analyzer answer parses (rate 0 in every iteration of ${read.length} legs: no self-written skill)`
  const falls = read.filter((d) => (d.parseLast as number) < (d.parseFirst as number)).length
  const first = mean(read.map((d) => d.parseFirst as number)) as number
  const last = mean(read.map((d) => d.parseLast as number)) as number
  return (
    `the parse rate from the first to the last third of the iterations falls in ${falls} of ${read.length} legs` +
    ` (mean ${first.toFixed(2)} → ${last.toFixed(2)})`
  )
}

/** The markdown section for one environment ('' without an upper bound to read). */
export function limitsSection({ env, split, average, upper, distill, legs, start }: LimitsInput): string {
  if (upper === null) return ''
  const of = (row: string) => legs.filter((d) => d.row === row)
  const [oracle, seed, off] = [of(UPPER_ROW), of(SEED_ROW), of(OPD_OFF_ROW)]
  const verdict =
    upper.half === null
      ? 'none yet: one paired seed gives no interval'
      : !gains(upper)
        ? '**signal strength**: even correct skills show no gain, so neither the quality of the self-written skills ' +
          'nor the analyzer that writes them (the upper bound does not use it) is what limits the result; the ' +
          'distillation signal itself is too weak or mis-shaped (λ_opd, β and the gate are where to look)'
        : gains(distill)
          ? '**none of the three**: the distillation gains with self-written skills as with correct ones'
          : '**skill quality**: correct skills gain, self-written ones do not'
  return [
    '',
    `### Which limit: ${env} (${split}, ${average})${start ? `, ${start}` : ''}`,
    '',
    `Rule: if \`${UPPER_ROW}\` − \`${OPD_OFF_ROW}\` has a 95% interval above 0, correct skills gain and the`,
    'self-written skills (their quality, or the analyzer writing them) are the gap; otherwise the signal is.',
    '',
    `- upper bound: \`${UPPER_ROW}\` − \`${OPD_OFF_ROW}\` = ${showInterval(upper)} points (seeds ${upper.seeds.join(', ')}${unpaired(upper)});` +
      (distill === null
        ? ''
        : ` self-written skills: \`${SEED_ROW}\` − \`${OPD_OFF_ROW}\` = ${showInterval(distill)} (seeds ${distill.seeds.join(', ')}${unpaired(distill)})`),
    `- skill quality: the teacher's gap on the expert's actions is above its gap on other actions in ${expertAbove(oracle)}` +
      ` with oracle skills, ${expertAbove(seed)} with self-written ones`,
    `- signal strength: gate mean ${range(
      [...oracle, ...seed].flatMap((d) => [d.gateMin, d.gateMax]),
      (x) => x.toFixed(3),
    )}` +
      ` (0.5: teacher and student agree); λ·L_opd / |L_pg| per leg ${range(
        [...oracle, ...seed].map((d) => d.opdShare),
        (x) => x.toExponential(1),
      )}`,
    `- analyzer erosion: under \`${SEED_ROW}\`, ${erosion(seed)}; under \`${OPD_OFF_ROW}\`, ${erosion(off)}`,
    `- verdict: ${verdict}.`,
    '',
  ].join('\n')
}
