// The run report page: one run, or several side by side (one header row and one colour per run). Header (what ran,
// its state, where the time went, hyperparameter changes), the curves, the per-family table and the links to each
// iteration's skill inspection page. Built from RunData alone; the caller says how links are made (files on disk
// for `seedflow report`, routes for `seedflow ui`) and what Temporal knows of each run's state, when it was asked.
// Above the header, a notice per run naming the artifacts that could not be read; below it, Stage 1's annotation.

import { envLabelOf } from '../seed/config.ts'
import type { AnnotationData } from './annotation-data.ts'
import { type Figure, runFigures } from './charts.ts'
import { damageNotice } from './damage.ts'
import { html, type Markup, page, trusted } from './html.ts'
import { type EvaluationData, phaseTimes, type RunData } from './run-data.ts'

export interface ReportLinks {
  /** The skill inspection page of one iteration. */
  skills(runId: string, iteration: number): string
  /** The run's page in Temporal's Web UI, when one is known. */
  temporal?(runId: string): string
}

export interface RunPageOptions {
  links: ReportLinks
  /** What Temporal says of each run (`RUNNING`, `FAILED` …), where the caller asked it. */
  workflowStatus?: ReadonlyMap<string, string>
  /** Reload the page every this many seconds (a running run in `seedflow ui`). */
  refreshSeconds?: number
  /** When the page was made (shown in the footer). */
  now?: Date
}

const pct = (x: number | null | undefined) => (x === null || x === undefined ? '–' : `${(100 * x).toFixed(1)}%`)

function modelName(config: Record<string, unknown>): string {
  const m = (config.model ?? {}) as Record<string, unknown>
  if (m.kind === 'imported') return `imported ${String(m.folder).split('/').filter(Boolean).pop() ?? ''}`
  if (m.kind === 'builtin') return `built-in (hidden ${m.hiddenSize}, ${m.numLayers} layers, vocab ${m.vocabSize})`
  return String(m.kind ?? '?')
}

function seconds(s: number): string {
  if (s < 90) return `${s.toFixed(0)} s`
  if (s < 5400) return `${(s / 60).toFixed(1)} min`
  return `${(s / 3600).toFixed(2)} h`
}

/** The run's state from its artifacts, with Temporal's word for it when known. */
function stateOf(run: RunData, workflow: string | undefined): Markup {
  const { complete, planned, finished } = run.progress
  const of = planned === null ? `${complete} iterations` : `${complete} of ${planned} iterations`
  const fromStore = finished ? `finished (${of})` : `${of} complete; last write ${run.lastWrite}`
  const cls =
    workflow === 'COMPLETED' || (workflow === undefined && finished)
      ? 'status-ok'
      : workflow === 'RUNNING' || workflow === undefined
        ? 'status-live'
        : 'status-bad'
  return html`<span class="${cls}">${workflow ? `${workflow.toLowerCase()} · ` : ''}${fromStore}</span>`
}

function computeSeconds(run: RunData): number {
  return phaseTimes(run).reduce((a, t) => a + t.seconds, 0)
}

function header(runs: readonly RunData[], options: RunPageOptions): Markup {
  const rows = runs.map((run) => {
    const c = run.record.config
    const temporal = options.links.temporal?.(run.runId)
    return html`<tr>
<td><strong>${run.runId}</strong>${temporal ? html` · <a href="${temporal}">Temporal</a>` : ''}</td>
<td>${String(c.algorithm ?? run.plan?.algorithm ?? '?')}</td>
<td>${envLabelOf(c.env) || String(run.plan?.env ?? '?')}</td>
<td>${modelName(c)}</td>
<td class="mono" title="${run.record.configSha256}">${run.record.configSha256.slice(0, 12)}</td>
<td>${run.record.seedflowVersion}</td>
<td>${stateOf(run, options.workflowStatus?.get(run.runId))}</td>
<td>${run.record.createdAt}</td>
<td class="num">${seconds(computeSeconds(run))}</td>
</tr>`
  })
  return html`<table>
<tr><th>run</th><th>algorithm</th><th>env</th><th>model</th><th>config</th><th>seedflow</th><th>state</th><th>created</th><th class="num">compute</th></tr>
${rows}
</table>`
}

/** The first iteration that ran under the configuration a change made (null: none yet). */
function tookEffect(run: RunData, configSha256: string | undefined): number | null {
  return run.iterations.find((it) => configSha256 !== undefined && it.configSha256 === configSha256)?.iteration ?? null
}

function hyperparameterSection(runs: readonly RunData[]): Markup {
  const changes = runs.flatMap((run) => run.hyperparameters.map((h) => ({ run, h })))
  if (changes.length === 0) return html`<p class="muted">No hyperparameter changes.</p>`
  return html`<table>
<tr><th>run</th><th>#</th><th>from</th><th>accepted</th><th>changes</th><th>took effect</th><th>config after</th></tr>
${changes.map(({ run, h }) => {
  const from = tookEffect(run, h.configSha256)
  return html`<tr><td>${run.runId}</td><td class="num">${h.seq}</td><td>${h.source}</td>
<td>${h.phase === 'iteration' ? `during iteration ${h.iteration}` : `in ${h.phase} of iteration ${h.iteration}`}, ${h.at}</td>
<td class="mono">${JSON.stringify(h.overrides)}</td><td>${from === null ? 'no iteration under it yet' : `iteration ${from}`}</td>
<td class="mono">${(h.configSha256 ?? '').slice(0, 12)}</td></tr>`
})}
</table>`
}

function figureBlock(f: Figure, heading: 'h2' | 'h3' = 'h3'): Markup {
  const title = heading === 'h2' ? html`<h2>${f.title}</h2>` : html`<h3>${f.title}</h3>`
  if (!f.svg) {
    return html`<figure class="empty" data-figure="${f.id}">${title}
<p class="note">Not recorded by this run's algorithm, or not reached yet.</p></figure>`
  }
  return html`<figure data-figure="${f.id}">${title}
${f.note ? html`<p class="note">${f.note}</p>` : ''}${trusted(f.svg)}</figure>`
}

/** Per-family success of each evaluation, for environments with more than one family; micro and macro below. */
function familyTable(runs: readonly RunData[]): Markup {
  const evals = runs.flatMap((run) => run.evaluations.map((e) => ({ run: run.runId, e })))
  const families = [...new Set(evals.flatMap(({ e }) => Object.keys(e.perFamily)))].sort()
  if (families.length < 2) return html`<p class="muted">One task family: micro and macro averages agree.</p>`
  const head = (run: string, e: EvaluationData) =>
    `${runs.length > 1 ? `${run} · ` : ''}${e.label}${e.from ? ` (${e.from})` : ''} · ${e.split}`
  return html`<table>
<tr><th>family</th>${evals.map(({ run, e }) => html`<th class="num">${head(run, e)}</th>`)}</tr>
${families.map(
  (f) =>
    html`<tr><td>${f}</td>${evals.map(({ e }) => {
      const v = e.perFamily[f]
      return html`<td class="num">${v ? `${pct(v.successRate)} (${v.tasks})` : '–'}</td>`
    })}</tr>`,
)}
<tr><th>micro</th>${evals.map(({ e }) => html`<th class="num">${pct(e.success)} (${e.tasks})</th>`)}</tr>
<tr><th>macro</th>${evals.map(({ e }) => html`<th class="num">${pct(e.macroSuccess)}</th>`)}</tr>
</table>`
}

function evaluationTable(runs: readonly RunData[]): Markup {
  const rows = runs.flatMap((run) =>
    run.evaluations.map(
      (e) => html`<tr><td>${run.runId}${e.from ? html` <span class="muted">(from ${e.from})</span>` : ''}</td>
<td>${e.label}</td><td>${e.split}</td><td class="num">${pct(e.success)} ± ${pct(1.96 * e.standardError)}</td>
<td class="num">${pct(e.macroSuccess)}</td><td class="num">${e.tasks}</td>
<td class="mono" title="${e.checkpointSha256 ?? ''}">${(e.checkpointSha256 ?? '–').slice(0, 12)}</td></tr>`,
    ),
  )
  if (rows.length === 0) return html`<p class="muted">No evaluation yet.</p>`
  return html`<table><tr><th>run</th><th>checkpoint</th><th>split</th><th class="num">micro (95%)</th>
<th class="num">macro</th><th class="num">tasks</th><th>model sha256</th></tr>${rows}</table>`
}

function skillLinks(runs: readonly RunData[], links: ReportLinks): Markup {
  return html`${runs.map((run) => {
    const shown = run.iterations.filter((it) => it.inspectable)
    const pruned = run.iterations.length - shown.length
    return html`<p><strong>${run.runId}</strong>: ${
      shown.length === 0
        ? html`<span class="muted">no iteration with its rollouts still stored</span>`
        : shown.map((it) => html`<a href="${links.skills(run.runId, it.iteration)}">iteration ${it.iteration}</a> `)
    }${pruned > 0 ? html`<span class="muted"> (${pruned} iterations pruned by retention)</span>` : ''}</p>`
  })}`
}

/** Stage 1's annotation per run that annotated: a warning where the annotator left trajectories without a skill. */
function annotationLines(runs: readonly RunData[]): Markup {
  return html`${runs.map((run) => {
    const a = run.annotation
    if (!a) return ''
    const head = `Stage 1 (${a.phase}): annotated ${a.annotated} of ${a.trajectories} trajectories`
    if (a.failed === 0)
      return html`<p class="annotation" data-run="${run.runId}"><strong>${run.runId}</strong>: <span class="status-ok">${head}</span></p>`
    return html`<p class="annotation notice-bad" data-run="${run.runId}"><strong>${run.runId}</strong>: <span class="status-bad">${head} (${a.failed} failed: ${failureText(a)})</span></p>`
  })}`
}

const REASON_CHARS = 200

/** Why annotations failed: the annotations file's failure codes, else the manifest's counts. */
function failureText(a: AnnotationData): string {
  if (a.failures.length > 0) {
    return a.failures
      .map((f) => {
        const reason = f.example.length > REASON_CHARS ? `${f.example.slice(0, REASON_CHARS)}…` : f.example
        return `${f.count} ${f.code === 'request-failed' ? 'without an answer from the annotator' : `unparsed (${f.code})`}${reason ? `, e.g. “${reason}”` : ''}`
      })
      .join('; ')
  }
  const parts = [
    a.requestFailures ? `${a.requestFailures} without an answer from the annotator` : '',
    a.unparsed ? `${a.unparsed} unparsed` : '',
  ].filter(Boolean)
  return parts.length > 0 ? `${parts.join(', ')}; no reasons recorded` : 'no reasons recorded'
}

export async function runPage(runs: readonly RunData[], options: RunPageOptions): Promise<string> {
  const { curves, wallTime } = await runFigures(runs)
  const title =
    runs.length === 1 ? `seedflow run ${runs[0]?.runId}` : `seedflow runs ${runs.map((r) => r.runId).join(', ')}`
  const body = html`<header class="top"><h1>${title}</h1>
<nav><a href="#curves">curves</a><a href="#evaluations">evaluations</a><a href="#families">families</a><a href="#skills">skill inspection</a></nav></header>
<main>
${runs.map((run) => damageNotice(run.runId, run.damaged))}
${header(runs, options)}
${annotationLines(runs)}
${figureBlock(wallTime, 'h2')}
<h2>Hyperparameter changes</h2>${hyperparameterSection(runs)}
<h2 id="curves">Curves</h2><div class="grid">${curves.map((f) => figureBlock(f))}</div>
<h2 id="evaluations">Evaluations</h2>${evaluationTable(runs)}
<h2 id="families">Per family</h2>${familyTable(runs)}
<h2 id="skills">Skill inspection</h2>
<p class="note">Per iteration: the analyzed trajectories, the skill the analyzer wrote, and each response's tokens coloured by how the skill moved the teacher.</p>
${skillLinks(runs, options.links)}
<p class="muted">Made ${(options.now ?? new Date()).toISOString()} from the stored artifacts.</p>
</main>`
  return page({ title, body, ...(options.refreshSeconds ? { refreshSeconds: options.refreshSeconds } : {}) })
}
