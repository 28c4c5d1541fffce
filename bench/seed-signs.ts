// Judges one SEED run's per-iteration diagnostics against the signs the paper shows for a working run (issue 20,
// item 4): the analyzer's answers parse (rate ≥ 0.5 in every iteration), the teacher with the skill prefers the
// expert's actions (its gap log π_teacher − log π_old on steps that took the expert's action above its gap on other
// steps in ≥ 75% of iterations), the distillation loss falls and settles (mean of the last third of iterations below
// that of the first third, the paper's Figure 9) and held-out success ends above where Stage 2 started (the
// Stage 1 evaluation, or the base's when the run has no Stage 1). Read from the store alone (the run report's
// reader), so it works on a finished, running or failed run; each sign that fails is printed as failed, with its
// figures.
//   node --import tsx bench/seed-signs.ts <run id> [--out bench/results/<name>]   (writes <name>.md and .json)
// The store: SEEDFLOW_S3_* when set, else the embedded default's folder (.seedflow/local/artifacts).
import { writeFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { localPaths } from '../infra/local-stack.ts'
import { type EvaluationData, type RunData, readRunData } from '../report/run-data.ts'
import { listRun } from '../report/run-listing.ts'
import { readSkillRecords } from '../report/skill-data.ts'
import { isFormatPlaceholder } from '../seed/index.ts'
import { storeFromEnv } from '../store/from-env.ts'

export interface IterationSigns {
  iteration: number
  parseRate: number | null
  /** Parsed answers whose skill is the return format's placeholder ("string"), of all analyzed. */
  placeholderRate: number | null
  gapExpert: number | null
  gapOther: number | null
  opdLoss: number | null
  pgLoss: number | null
  gateMean: number | null
  rolloutSuccess: number | null
}

export interface Sign {
  name: string
  passed: boolean
  figures: string
}

export interface SignsReport {
  runId: string
  iterations: IterationSigns[]
  evaluations: Array<
    Pick<EvaluationData, 'label' | 'split' | 'success' | 'standardError' | 'tasks' | 'checkpointSha256'>
  >
  signs: Sign[]
}

const value = (m: Record<string, number | null | undefined>, name: string) => {
  const v = m[name]
  return typeof v === 'number' && Number.isFinite(v) ? v : null
}
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length
const fmt = (x: number | null, digits = 3) => (x === null ? '–' : x.toFixed(digits))
const pct = (x: number) => `${(100 * x).toFixed(1)}%`

/**
 * The four signs of a run's data; a sign without the figures it needs fails, saying so. The parse sign counts
 * only real skills: an answer that copies the return format's placeholder parses, but is no skill.
 * `placeholders`: each iteration's placeholder rate where its metrics lack it (runs from before the metric).
 */
export function judgeSigns(run: RunData, placeholders: ReadonlyMap<number, number> = new Map()): SignsReport {
  const iterations = run.iterations.map((it) => {
    const m = it.metrics as Record<string, number | null | undefined>
    return {
      iteration: it.iteration,
      parseRate: value(m, 'analyze/parse_rate'),
      placeholderRate: value(m, 'analyze/placeholder_rate') ?? placeholders.get(it.iteration) ?? null,
      gapExpert: value(m, 'rescore/teacher_gap_expert'),
      gapOther: value(m, 'rescore/teacher_gap_other'),
      opdLoss: value(m, 'update/opd_loss'),
      pgLoss: value(m, 'update/pg_loss'),
      gateMean: value(m, 'update/opd_gate_mean'),
      rolloutSuccess: value(m, 'rollout/success_rate'),
    }
  })
  const signs: Sign[] = []

  const real = iterations.map((it) => (it.parseRate === null ? null : it.parseRate - (it.placeholderRate ?? 0)))
  const below = iterations.filter((_, i) => (real[i] ?? -1) < 0.5).map((it) => it.iteration)
  const copies = iterations.some((it) => (it.placeholderRate ?? 0) > 0)
    ? `; parse rate counting them ${iterations.map((it) => fmt(it.parseRate, 2)).join(', ')}`
    : ''
  signs.push({
    name: 'parse rate ≥ 0.5 in every iteration (skills that parse and are not the format placeholder)',
    passed: iterations.length > 0 && below.length === 0,
    figures:
      iterations.length === 0
        ? 'no iteration'
        : `${real.map((p) => fmt(p, 2)).join(', ')}${below.length ? ` (below or missing in iterations ${below.join(', ')})` : ''}${copies}`,
  })

  const withGaps = iterations.filter((it) => it.gapExpert !== null && it.gapOther !== null)
  const above = withGaps.filter((it) => (it.gapExpert as number) > (it.gapOther as number)).length
  signs.push({
    name: "teacher gap on the expert's actions above that on other actions in ≥ 75% of iterations",
    passed: iterations.length > 0 && above >= 0.75 * iterations.length,
    figures: `${above} of ${iterations.length} iterations (${withGaps.length} with both gaps)`,
  })

  // thirds of the iterations by position; an iteration without OPD (no skill parsed) is left out of its third
  const third = Math.floor(iterations.length / 3)
  const losses = (part: readonly IterationSigns[]) =>
    part.filter((it) => it.opdLoss !== null).map((it) => it.opdLoss as number)
  const firstLosses = losses(iterations.slice(0, third))
  const lastLosses = losses(iterations.slice(iterations.length - third))
  const without = iterations.filter((it) => it.opdLoss === null).map((it) => it.iteration)
  const noOpd = without.length ? `; no OPD in iterations ${without.join(', ')}` : ''
  if (third === 0 || firstLosses.length === 0 || lastLosses.length === 0) {
    signs.push({
      name: 'OPD loss of the last third of iterations below that of the first third',
      passed: false,
      figures: `needs ≥ 3 iterations and an OPD loss in each third (${iterations.length} iterations${noOpd})`,
    })
  } else {
    const first = mean(firstLosses)
    const last = mean(lastLosses)
    signs.push({
      name: 'OPD loss of the last third of iterations below that of the first third',
      passed: last < first,
      figures: `${fmt(first, 4)} → ${fmt(last, 4)} (first ${third} vs last ${third} iterations${noOpd})`,
    })
  }

  const split = run.evaluations.find((e) => e.kind === 'iteration')?.split ?? run.evaluations[0]?.split
  const onSplit = run.evaluations.filter((e) => e.split === split)
  const start = onSplit.find((e) => e.kind === 'stage1') ?? onSplit.find((e) => e.kind === 'base')
  const finalEval = onSplit.filter((e) => e.kind === 'iteration').at(-1)
  const planned = run.progress.planned
  const isFinal = finalEval !== undefined && planned !== null && finalEval.iteration === planned - 1
  if (!start || !finalEval) {
    signs.push({
      name: 'held-out success above its start',
      passed: false,
      figures: `no ${start ? 'iteration' : 'start'} evaluation on ${split ?? 'any split'}`,
    })
  } else {
    const se = Math.sqrt(start.standardError ** 2 + finalEval.standardError ** 2)
    signs.push({
      name: 'held-out success above its start',
      passed: finalEval.success > start.success,
      figures:
        `${start.label} ${pct(start.success)} → ${finalEval.label} ${pct(finalEval.success)} on ${split} ` +
        `(${finalEval.tasks} tasks; difference ${((finalEval.success - start.success) * 100).toFixed(1)} ± ` +
        `${(196 * se).toFixed(1)} points, 95%)${isFinal ? '' : ' — not the final iteration'}`,
    })
  }
  return {
    runId: run.runId,
    iterations,
    evaluations: run.evaluations.map((e) => ({
      label: e.label,
      split: e.split,
      success: e.success,
      standardError: e.standardError,
      tasks: e.tasks,
      checkpointSha256: e.checkpointSha256,
    })),
    signs,
  }
}

export function signsMarkdown(r: SignsReport): string {
  const lines = [
    `# The paper's signs, run \`${r.runId}\``,
    '',
    `Made by \`node --import tsx bench/seed-signs.ts ${r.runId}\` from the run's stored metrics and evaluations.`,
    '',
    '| iteration | parse rate | placeholder skills | teacher gap expert | teacher gap other | OPD loss | pg loss | gate mean | rollout success |',
    '|---|---|---|---|---|---|---|---|---|',
    ...r.iterations.map(
      (it) =>
        `| ${it.iteration} | ${fmt(it.parseRate, 2)} | ${fmt(it.placeholderRate, 2)} | ${fmt(it.gapExpert)} | ${fmt(it.gapOther)} | ${fmt(it.opdLoss, 4)} | ${fmt(it.pgLoss, 4)} | ${fmt(it.gateMean)} | ${it.rolloutSuccess === null ? '–' : pct(it.rolloutSuccess)} |`,
    ),
    '',
    '| evaluation | split | success | tasks | checkpoint sha256 |',
    '|---|---|---|---|---|',
    ...r.evaluations.map(
      (e) =>
        `| ${e.label} | ${e.split} | ${pct(e.success)} ± ${(196 * e.standardError).toFixed(1)} | ${e.tasks} | ${e.checkpointSha256?.slice(0, 16) ?? '–'} |`,
    ),
    '',
    '| sign | verdict | figures |',
    '|---|---|---|',
    ...r.signs.map((s) => `| ${s.name} | ${s.passed ? 'passed' : '**failed**'} | ${s.figures} |`),
    '',
  ]
  return lines.join('\n')
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { out: { type: 'string' } } })
  const runId = positionals[0]
  if (!runId) {
    console.error('usage: node --import tsx bench/seed-signs.ts <run id> [--out bench/results/<name>]')
    process.exit(2)
  }
  const store = storeFromEnv(localPaths().artifacts)
  const listing = await listRun(store, runId)
  const run = await readRunData(store, runId, listing)
  // runs from before `analyze/placeholder_rate`: counted from the stored skills
  const placeholders = new Map<number, number>()
  for (const it of run.iterations) {
    if (it.metrics['analyze/placeholder_rate'] != null || it.metrics['analyze/parse_rate'] == null) continue
    const records = await readSkillRecords(store, runId, it.iteration, listing)
    placeholders.set(it.iteration, records.filter((s) => s.ok && isFormatPlaceholder(s.skill)).length / records.length)
  }
  const report = judgeSigns(run, placeholders)
  const text = signsMarkdown(report)
  process.stdout.write(text)
  if (values.out) {
    writeFileSync(`${values.out}.md`, text)
    writeFileSync(`${values.out}.json`, `${JSON.stringify(report, null, 1)}\n`)
  }
}
