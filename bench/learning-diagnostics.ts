// The per-iteration diagnostics of the learning benchmark's legs, summed up per (env, row, seed) for
// learning.md: is the distillation signal there at all (gate mean, positive-gap share, λ·L_opd beside |L_pg|),
// does the teacher prefer the expert's actions (how many iterations its gap on them is above its gap on other
// actions; with the control gate, whether it does so against another task's skill too), and does the analyzer
// stay alive (parse rate in the first and last third of the iterations). Read from the legs' files in
// `<results stem>-runs/` (bench/learning.ts writes them), so it can be rebuilt any time.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

interface IterationRecord {
  metrics: Record<string, number | null>
}

interface LegFile {
  config?: { stage2?: { opdCoef?: number } }
  iterations: Array<IterationRecord | null>
}

export interface LegDiagnostics {
  env: string
  row: string
  seed: string
  iterations: number
  /** Mean parse rate over the first and the last third of the iterations (null: no analyze phase). */
  parseFirst: number | null
  parseLast: number | null
  /** The highest parse rate of any iteration (null: no analyze phase): 0 where no analyzer answer ever parsed. */
  parseMax: number | null
  /** Iterations whose teacher gap on the expert's actions is above that on other actions, of those with both. */
  expertAbove: number
  withGaps: number
  /**
   * With the control gate: the mean over iterations of the control gap log π_teacher − log π_control per response
   * on the expert's actions and on other actions, and in how many iterations the first is above the second.
   */
  controlExpert: number | null
  controlOther: number | null
  controlAbove: number
  /** Iterations whose control gap on the expert's actions is above 0: the premise's sign (docs/benchmarks.md §3.8). */
  controlPositive: number
  withControlGaps: number
  gateMin: number | null
  gateMax: number | null
  /** Median over iterations of λ_opd·|L_opd| / |L_pg| (null without both). */
  opdShare: number | null
}

/** The mean of `xs` (null for none). */
export const mean = (xs: readonly number[]) => (xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length)

function median(xs: readonly number[]): number | null {
  if (xs.length === 0) return null
  const s = [...xs].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2
}

const numbers = (its: readonly IterationRecord[], name: string) =>
  its.map((it) => it.metrics[name]).filter((v): v is number => typeof v === 'number' && Number.isFinite(v))

export function legDiagnostics(env: string, row: string, seed: string, leg: LegFile): LegDiagnostics {
  const its = leg.iterations.filter((it): it is IterationRecord => it !== null)
  const third = Math.max(1, Math.floor(its.length / 3))
  const parse = (part: readonly IterationRecord[]) => mean(numbers(part, 'analyze/parse_rate'))
  const sides = (name: 'teacher' | 'control') =>
    its.flatMap((it) => {
      const e = it.metrics[`rescore/${name}_gap_expert`]
      const o = it.metrics[`rescore/${name}_gap_other`]
      return typeof e === 'number' && typeof o === 'number' ? [[e, o] as const] : []
    })
  const parseRates = numbers(its, 'analyze/parse_rate')
  const gaps = sides('teacher').map(([e, o]) => e > o)
  const control = sides('control')
  const gate = numbers(its, 'update/opd_gate_mean')
  const lambda = leg.config?.stage2?.opdCoef ?? 0
  const shares = its.flatMap((it) => {
    const opd = it.metrics['update/opd_loss']
    const pg = it.metrics['update/pg_loss']
    return typeof opd === 'number' && typeof pg === 'number' && pg !== 0
      ? [(lambda * Math.abs(opd)) / Math.abs(pg)]
      : []
  })
  return {
    env,
    row,
    seed,
    iterations: its.length,
    parseFirst: parse(its.slice(0, third)),
    parseLast: parse(its.slice(its.length - third)),
    parseMax: parseRates.length ? Math.max(...parseRates) : null,
    expertAbove: gaps.filter(Boolean).length,
    withGaps: gaps.length,
    controlExpert: mean(control.map(([e]) => e)),
    controlOther: mean(control.map(([, o]) => o)),
    controlAbove: control.filter(([e, o]) => e > o).length,
    controlPositive: control.filter(([e]) => e > 0).length,
    withControlGaps: control.length,
    gateMin: gate.length ? Math.min(...gate) : null,
    gateMax: gate.length ? Math.max(...gate) : null,
    opdShare: median(shares),
  }
}

/** Every leg file in `dir` named `<env>-<row>-<seed>.json` whose (env, row, seed) is in `legs`. */
export function readLegDiagnostics(dir: string, legs: ReadonlyArray<[string, string, string]>): LegDiagnostics[] {
  if (!existsSync(dir)) return []
  const present = new Set(readdirSync(dir))
  const out: LegDiagnostics[] = []
  for (const [env, row, seed] of legs) {
    const name = `${env}-${row}-${seed}.json`
    if (!present.has(name)) continue
    out.push(legDiagnostics(env, row, seed, JSON.parse(readFileSync(join(dir, name), 'utf8')) as LegFile))
  }
  return out
}

const f2 = (x: number | null) => (x === null ? '–' : x.toFixed(2))
const f3 = (x: number | null) => (x === null ? '–' : x.toFixed(3))

/** The markdown section: one line per leg, and how to read it. */
export function diagnosticsSection(legs: readonly LegDiagnostics[]): string {
  if (legs.length === 0) return ''
  const lines = [
    '',
    '## Per-iteration diagnostics, per leg',
    '',
    "From each leg's `metrics.json` per iteration (`learning-runs/`). **Analyzer erosion**: parse rate in the first",
    "vs the last third of the iterations. **Skill quality**: in how many iterations the teacher's gap (log π_teacher −",
    "log π_old) on steps that took the expert's action is above its gap on other steps; compare a row's count with",
    "`seed-oracle`'s (correct skills) of the same seed. **Signal strength**: the OPD gate mean (0.5: the teacher agrees",
    'with the student) and the median of λ_opd·|L_opd| / |L_pg|, the distillation term beside the policy gradient.',
    'With the control gate (`stage2.opdGate: control`) or `stage2.controlGap`, the control gap log π_teacher − log π_control per response,',
    "averaged over iterations, on the expert's actions / on other actions, in how many iterations the first is above",
    "the second and in how many it is above 0 (the premise's sign): what the skill says about the task beyond what any",
    'skill block does. Which limit these figures show:',
    'docs/benchmarks.md §3.4 (the rows) and docs/benchmarks.md §3.6 (the control gate).',
    '',
    '| env | row | seed | iterations | parse rate first → last third | expert gap above other | gate mean | λ·L_opd / \\|L_pg\\| | control gap expert / other |',
    '|---|---|---|---|---|---|---|---|---|',
  ]
  for (const d of legs) {
    const parse = d.parseFirst === null ? '–' : `${f2(d.parseFirst)} → ${f2(d.parseLast)}`
    const gaps = d.withGaps === 0 ? '–' : `${d.expertAbove} of ${d.withGaps}`
    const gate = d.gateMin === null ? '–' : `${f3(d.gateMin)}–${f3(d.gateMax)}`
    const control =
      d.withControlGaps === 0
        ? '–'
        : `${f2(d.controlExpert)} / ${f2(d.controlOther)} (${d.controlAbove} of ${d.withControlGaps} above; ${d.controlPositive} of ${d.withControlGaps} > 0)`
    lines.push(
      `| ${d.env} | ${d.row} | ${d.seed} | ${d.iterations} | ${parse} | ${gaps} | ${gate} | ${d.opdShare === null ? '–' : d.opdShare.toExponential(1)} | ${control} |`,
    )
  }
  return `${lines.join('\n')}\n`
}
