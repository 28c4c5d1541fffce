// The run report's figures as vega-lite specs over one or several runs' data, rendered to SVG here (vega-svg.ts)
// so the page needs no script and no network. One figure per quantity: held-out success per evaluation with its
// interval, then one per iteration metric (a run is one colour; a figure with two quantities, such as the teacher
// gap on expert vs other actions, names both in the legend), and where the wall time went.
import type { IterationMetricName } from '../records/iteration-metrics.ts'
import { type IterationData, phaseTimes, type RunData } from './run-data.ts'
import { vegaLiteSvg } from './vega-svg.ts'

export interface Figure {
  id: string
  title: string
  /** The rendered SVG; null when no run has a value for it (the algorithm does not record it). */
  svg: string | null
  /** Data points drawn (symbols), over all series. */
  points: number
  note?: string
}

interface IterationChart {
  id: string
  title: string
  y: string
  percent?: boolean
  series: Array<{ label?: string; value: (it: IterationData) => number | null }>
  note?: string
}

const metric = (name: IterationMetricName) => (it: IterationData) => it.metrics[name] ?? null

const ITERATION_CHARTS: IterationChart[] = [
  {
    id: 'rollout-success',
    title: 'Rollout success',
    y: 'success (%)',
    percent: true,
    series: [{ value: metric('rollout/success_rate') }],
  },
  { id: 'episode-length', title: 'Episode length', y: 'steps', series: [{ value: metric('rollout/mean_length') }] },
  {
    id: 'invalid-rate',
    title: 'Invalid-action rate',
    y: 'invalid steps (%)',
    percent: true,
    series: [{ value: metric('rollout/invalid_rate') }],
  },
  {
    id: 'failed-episodes',
    title: 'Episodes the environment failed',
    y: 'episodes',
    // drawn only for iterations that had some: a built-in environment never fails one
    series: [{ value: (it) => it.metrics['rollout/failed_episodes'] || null }],
    note: "A remote environment's timeouts, 5xx replies or restarts: each ends its episode as failed, unsolved, none of its steps trained on.",
  },
  { id: 'pg-loss', title: 'Policy-gradient loss', y: 'L_pg', series: [{ value: metric('update/pg_loss') }] },
  { id: 'kl', title: 'KL to the reference', y: 'k3 KL', series: [{ value: metric('update/kl') }] },
  { id: 'entropy', title: 'Entropy', y: 'nats per token', series: [{ value: metric('update/entropy') }] },
  { id: 'opd-loss', title: 'OPD loss', y: 'L_opd', series: [{ value: metric('update/opd_loss') }] },
  {
    id: 'opd-gate',
    title: 'OPD gate',
    y: 'share',
    series: [
      { label: 'gate mean', value: metric('update/opd_gate_mean') },
      { label: 'positive-gap share', value: metric('update/opd_positive_gap_share') },
    ],
    note: 'Token means over the distilled tokens; 0.5 is the gate of a teacher that agrees with the student.',
  },
  {
    id: 'parse-rate',
    title: 'Skill parse rate',
    y: 'parsed (%)',
    percent: true,
    series: [{ value: metric('analyze/parse_rate') }],
  },
  {
    id: 'teacher-gap',
    title: 'Teacher gap on expert vs other actions',
    y: 'teacher − student log-prob',
    series: [
      { label: 'expert actions', value: metric('rescore/teacher_gap_expert') },
      { label: 'other actions', value: metric('rescore/teacher_gap_other') },
    ],
    note: "Mean teacher − student log-prob of the sampled responses, on steps where the policy took the environment expert's action vs the others: an informative skill lifts the first above the second.",
  },
  {
    id: 'tokens-per-second',
    title: 'Sampling throughput',
    y: 'new tokens / s',
    series: [{ value: (it) => it.rolloutTokensPerSecond }],
  },
]

const SIZE = { width: 380, height: 180 }
const SCHEMA = 'https://vega.github.io/schema/vega-lite/v6.json'

/** One drawn value: which run, which quantity (a chart's series label, or a split), where, and how much. */
interface LinePoint {
  run: string
  quantity: string
  [field: string]: unknown
}

/**
 * Lines with a point per value. One run: a colour per quantity. Several runs: a colour per run, the same in every
 * figure (the runs' order fixes the scale), and a dash per quantity.
 */
function lineSpec(values: LinePoint[], runIds: readonly string[], x: object, y: object, extra: object[] = []): object {
  const quantities = [...new Set(values.map((v) => v.quantity))]
  const legend = { orient: 'bottom', labelLimit: 360 }
  const several = runIds.length > 1
  const color = several
    ? { field: 'run', type: 'nominal', title: null, scale: { domain: [...runIds] }, legend }
    : { field: 'quantity', type: 'nominal', title: null, legend: quantities.length > 1 ? legend : null }
  // the dash legend goes above the plot: two legends side by side below it would widen the figure
  const dashLegend = { orient: 'top', labelLimit: 360 }
  const dash =
    several && quantities.length > 1
      ? { strokeDash: { field: 'quantity', type: 'nominal', title: null, legend: dashLegend } }
      : {}
  return {
    $schema: SCHEMA,
    ...SIZE,
    data: { values },
    layer: [
      ...extra.map((layer) => ({ ...layer, encoding: { ...(layer as { encoding: object }).encoding, color } })),
      { mark: { type: 'line', point: { filled: true, size: 36 } }, encoding: { x, y, color, ...dash } },
    ],
  }
}

/** An integer x axis over [lo, hi] (at least one unit wide, so a single point does not get a fractional axis). */
function integerAxis(field: string, title: string, xs: readonly number[]): object {
  const lo = Math.min(...xs)
  const hi = Math.max(lo + 1, ...xs)
  return { field, type: 'quantitative', title, scale: { domain: [lo, hi] }, axis: { tickMinStep: 1, format: 'd' } }
}

async function iterationFigure(chart: IterationChart, runs: readonly RunData[]): Promise<Figure> {
  const values: LinePoint[] = []
  for (const run of runs) {
    for (const s of chart.series) {
      for (const it of run.iterations) {
        const v = s.value(it)
        if (v === null || !Number.isFinite(v)) continue
        values.push({
          run: run.runId,
          quantity: s.label ?? chart.title,
          iteration: it.iteration,
          value: chart.percent ? 100 * v : v,
        })
      }
    }
  }
  const base = { id: chart.id, title: chart.title, points: values.length, ...(chart.note ? { note: chart.note } : {}) }
  if (values.length === 0) return { ...base, svg: null }
  const x = integerAxis(
    'iteration',
    'iteration',
    values.map((v) => v.iteration as number),
  )
  const y = { field: 'value', type: 'quantitative', title: chart.y, scale: { zero: false }, axis: { format: '~r' } }
  return {
    ...base,
    svg: await vegaLiteSvg(
      lineSpec(
        values,
        runs.map((r) => r.runId),
        x,
        y,
      ),
    ),
  }
}

/**
 * Held-out success per evaluation, one series per run and split, with the 95% interval (±1.96 standard errors)
 * as a rule. x is the Stage 2 updates behind the checkpoint: iteration k's at k + 1, Stage 1's at 0, the base's at
 * 0 too when the run has no Stage 1 (a row that starts from the base) and at −1 otherwise.
 */
async function evaluationFigure(runs: readonly RunData[]): Promise<Figure> {
  const values: LinePoint[] = []
  for (const run of runs) {
    const hasStage1 = run.evaluations.some((e) => e.kind === 'stage1')
    for (const e of run.evaluations) {
      const x = e.kind === 'iteration' ? e.iteration + 1 : e.kind === 'stage1' || !hasStage1 ? 0 : -1
      const half = 1.96 * e.standardError
      values.push({
        run: run.runId,
        quantity: e.split,
        updates: x,
        success: 100 * e.success,
        low: 100 * Math.max(0, e.success - half),
        high: 100 * Math.min(1, e.success + half),
        label: e.label,
      })
    }
  }
  const base = {
    id: 'held-out',
    title: 'Held-out success',
    points: values.length,
    note: 'Micro average over the evaluated tasks, with a 95% interval; x counts the Stage 2 updates behind the checkpoint (0: the start, −1: the base before Stage 1).',
  }
  if (values.length === 0) return { ...base, svg: null }
  const x = integerAxis(
    'updates',
    'Stage 2 updates',
    values.map((v) => v.updates as number),
  )
  const y = { field: 'success', type: 'quantitative', title: 'success (%)', scale: { domain: [0, 100] } }
  const interval = {
    mark: { type: 'rule', opacity: 0.6 },
    encoding: { x, y: { field: 'low', type: 'quantitative' }, y2: { field: 'high' }, detail: { field: 'quantity' } },
  }
  return {
    ...base,
    svg: await vegaLiteSvg(
      lineSpec(
        values,
        runs.map((r) => r.runId),
        x,
        y,
        [interval],
      ),
    ),
  }
}

/** Compute seconds per phase: a bar for the stages before Stage 2, then one per iteration (with its evaluations). */
async function wallTimeFigure(runs: readonly RunData[]): Promise<Figure> {
  const values = runs.flatMap((run) => phaseTimes(run).map((t) => ({ run: run.runId, ...t })))
  const base = {
    id: 'wall-time',
    title: 'Where the time went',
    points: values.length,
    note: "Compute seconds of each phase's shards (summed over shards, so parallel shards add up); `start` is everything before Stage 2.",
  }
  if (values.length === 0) return { ...base, svg: null }
  const spec = {
    $schema: SCHEMA,
    data: { values },
    ...(runs.length > 1 ? { facet: { row: { field: 'run', type: 'nominal', title: null } }, spec: bars() } : bars()),
  }
  return { ...base, svg: await vegaLiteSvg(spec) }
}

function bars(): object {
  return {
    width: 780,
    height: 160,
    mark: 'bar',
    encoding: {
      x: { field: 'part', type: 'ordinal', title: 'iteration', sort: { field: 'order', op: 'min' } },
      y: { field: 'seconds', type: 'quantitative', aggregate: 'sum', title: 'compute seconds' },
      color: { field: 'phase', type: 'nominal', title: 'phase', legend: { orient: 'right' } },
    },
  }
}

/** Every figure of the report, in the order the page shows them. */
export async function runFigures(runs: readonly RunData[]): Promise<{ curves: Figure[]; wallTime: Figure }> {
  const curves = [await evaluationFigure(runs)]
  for (const chart of ITERATION_CHARTS) curves.push(await iterationFigure(chart, runs))
  return { curves, wallTime: await wallTimeFigure(runs) }
}
