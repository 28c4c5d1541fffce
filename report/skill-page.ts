// The skill inspection page of one iteration: for each shown trajectory the task, outcome and steps, the skill the
// analyzer wrote (raw answer, parse status), and each response's tokens coloured by the skill-induced shift
// (teacher − student log-prob: green where the skill made the token likelier, red where less likely) with the gate
// as the underline. Filters (outcome, parse failures) and a sort by largest shift run in a small inline script;
// every text the model or environment wrote goes through the escaping template.
import { damageNotice } from './damage.ts'
import { html, type Markup, page } from './html.ts'
import type { IterationSkills, StepView, TokenView, TrajectoryView } from './skill-data.ts'

/** Longest prompt text shown whole; longer ones are cut with a note (the page's size stays bounded). */
const MAX_PROMPT_CHARS = 6000
/** Steps shown per trajectory. */
const MAX_STEPS = 30
/** |shift| at which the colour is full. */
const FULL_SHIFT = 3

function clip(text: string): string {
  return text.length <= MAX_PROMPT_CHARS
    ? text
    : `${text.slice(0, MAX_PROMPT_CHARS)}\n… (${text.length - MAX_PROMPT_CHARS} more characters not shown)`
}

function tokenStyle(t: TokenView): string {
  if (t.shift === null) return ''
  const a = (0.85 * Math.min(1, Math.abs(t.shift) / FULL_SHIFT)).toFixed(3)
  const bg = t.shift >= 0 ? `rgba(26,127,55,${a})` : `rgba(180,35,24,${a})`
  return `background:${bg};border-bottom:3px solid rgba(34,87,168,${(t.gate ?? 0).toFixed(3)})`
}

function token(t: TokenView): Markup {
  const title =
    t.shift === null
      ? `token ${t.id}: no teacher signal`
      : `token ${t.id}: shift ${t.shift >= 0 ? '+' : ''}${t.shift.toFixed(3)}, gate ${(t.gate ?? 0).toFixed(3)}`
  return html`<span class="tok${t.shift === null ? ' none' : ''}" style="${tokenStyle(t)}" title="${title}">${t.text}</span>`
}

/** A number as people read it: at most 3 decimals, no float noise (−1.5000000000000002 → −1.5). */
export function num(x: number): string {
  return String(Number(x.toFixed(3)))
}

function stepBlock(s: StepView, showTeacherPrompt: boolean): Markup {
  const expert = s.action !== null && s.action === s.expertAction
  return html`<div class="step">
<div class="step-head">step ${s.step} · <code>${s.action ?? '(no action parsed)'}</code>${s.valid ? '' : html` <span class="status-bad">invalid</span>`}
 · expert <code>${s.expertAction}</code>${expert ? html` <span class="status-ok">✓</span>` : ''} · reward ${num(s.reward)}</div>
<div class="resp">${s.tokens.map(token)}</div>
<details><summary>prompts</summary><div class="muted">acting prompt</div><pre>${clip(s.actingPrompt)}</pre>
${showTeacherPrompt && s.teacherPrompt !== null ? html`<div class="muted">teacher prompt (with the skill)</div><pre>${clip(s.teacherPrompt)}</pre>` : ''}</details>
</div>`
}

function skillBlock(t: TrajectoryView): Markup {
  const s = t.skill
  if (!s) return html`<p class="muted">Not analyzed (no analyzer record for this trajectory).</p>`
  const status = s.ok
    ? html`<span class="status-ok">parsed</span>`
    : html`<span class="status-bad">parse failure${s.failure ? `: ${s.failure.code}` : ''}</span>${s.failure ? html` <span class="muted">${s.failure.reason}</span>` : ''}`
  return html`<div class="skill"><div>skill: ${status}</div>
${s.summary ? html`<p><strong>summary</strong> ${s.summary}</p>` : ''}
${s.skill ? html`<pre class="skill-text">${s.skill}</pre>` : ''}
<details><summary>raw analyzer answer (${s.raw.length} characters)</summary><pre>${clip(s.raw)}</pre></details>
<details><summary>analyzer prompt</summary><pre>${clip(s.prompt)}</pre></details></div>`
}

function trajectoryBlock(t: TrajectoryView): Markup {
  const parsed = t.skill ? (t.skill.ok ? '1' : '0') : 'none'
  const shown = t.steps.slice(0, MAX_STEPS)
  return html`<section class="traj" data-id="${t.id}" data-won="${t.won ? '1' : '0'}" data-parsed="${parsed}" data-shift="${t.maxShift.toFixed(4)}">
<h3>trajectory ${t.id} · group ${t.group} · ${t.won ? html`<span class="status-ok">success</span>` : html`<span class="status-bad">failure</span>`} · reward ${num(t.totalReward)} · ${t.steps.length} steps · largest |shift| ${t.maxShift.toFixed(2)}</h3>
<p class="muted mono">task ${t.task}</p>
${skillBlock(t)}
${shown.map((step, i) => stepBlock(step, i === shown.findIndex((x) => x.teacherPrompt !== null)))}
${t.steps.length > shown.length ? html`<p class="muted">${t.steps.length - shown.length} more steps not shown.</p>` : ''}
</section>`
}

const STYLE = `
.controls { position: sticky; top: 0; background: #fff; padding: 8px 0; border-bottom: 1px solid var(--line); z-index: 1; }
.controls label { margin-right: 16px; }
.traj { border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; margin: 14px 0; }
.traj[hidden] { display: none; }
.step { margin: 4px 0 6px; padding-left: 10px; border-left: 3px solid var(--line); }
.step details { font-size: 12.5px; }
.summary td { padding-right: 18px; }
.step-head { color: var(--muted); font-size: 12.5px; }
.resp { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px; white-space: pre-wrap; word-break: break-word; margin: 3px 0; }
.tok { padding: 1px 0; }
.tok.none { border-bottom: 1px dotted #9aa3ad; }
.skill { background: var(--panel); padding: 6px 10px; border-radius: 4px; margin: 6px 0; }
.skill-text { background: #fff; }
.legend span { display: inline-block; padding: 1px 6px; margin-right: 6px; }
`

const SCRIPT = `
(function () {
  var list = document.getElementById('trajectories');
  var outcome = document.getElementById('outcome');
  var parseOnly = document.getElementById('parse-failures');
  var sort = document.getElementById('sort');
  var count = document.getElementById('count');
  var cards = Array.prototype.slice.call(list.querySelectorAll('section.traj'));
  function apply() {
    var shown = 0;
    cards.forEach(function (c) {
      var ok = (outcome.value === 'all' || (outcome.value === 'success') === (c.dataset.won === '1')) &&
        (!parseOnly.checked || c.dataset.parsed === '0');
      c.hidden = !ok;
      if (ok) shown++;
    });
    var key = sort.value;
    cards.slice().sort(function (a, b) {
      return key === 'shift' ? Number(b.dataset.shift) - Number(a.dataset.shift) : Number(a.dataset.id) - Number(b.dataset.id);
    }).forEach(function (c) { list.appendChild(c); });
    count.textContent = String(shown);
  }
  [outcome, parseOnly, sort].forEach(function (el) { el.addEventListener('change', apply); });
  apply();
})();
`

/** Counts over the shown trajectories, and the mean shift on steps that took the expert's action vs the others. */
function summaryTable(data: IterationSkills): Markup {
  const ts = data.trajectories
  const parsed = ts.filter((t) => t.skill?.ok).length
  const analyzed = ts.filter((t) => t.skill).length
  const mean = (expert: boolean) => {
    const shifts = ts.flatMap((t) =>
      t.steps
        .filter((s) => (s.action !== null && s.action === s.expertAction) === expert)
        .flatMap((s) => s.tokens.flatMap((k) => (k.shift === null ? [] : [k.shift]))),
    )
    return shifts.length === 0
      ? '–'
      : `${num(shifts.reduce((a, b) => a + b, 0) / shifts.length)} (${shifts.length} tokens)`
  }
  return html`<table class="summary"><tr><td>successes</td><td>${ts.filter((t) => t.won).length} of ${ts.length}</td>
<td>skills parsed</td><td>${parsed} of ${analyzed} analyzed</td>
<td>mean shift, expert's action</td><td>${mean(true)}</td><td>other actions</td><td>${mean(false)}</td></tr></table>`
}

export function skillPage(data: IterationSkills, links: { report: string }): string {
  const title = `${data.runId}: skills of iteration ${data.iteration}`
  const sampled =
    data.trajectories.length < data.total
      ? html`Showing ${data.trajectories.length} of ${data.total} trajectories (evenly spaced by id; <code>--trajectories</code> shows more).`
      : html`All ${data.total} trajectories.`
  const body = html`<header class="top"><h1>${title}</h1><nav><a href="${links.report}">← run report</a></nav></header>
<main>
${damageNotice(data.runId, data.damaged)}
<p class="note">${sampled} ${data.tokenizerNote ?? ''}</p>
${summaryTable(data)}
<p class="note legend">Response tokens are coloured by the skill-induced shift, teacher − student log-prob (the teacher reads the
skill, the student does not; student = π_old): <span style="background:rgba(26,127,55,0.6)">likelier with the skill</span>
<span style="background:rgba(180,35,24,0.6)">less likely</span> <span class="tok none">no teacher signal</span>; the blue underline's
strength is the OPD gate σ(β·shift), β = ${data.beta ?? 'unknown (the configuration could not be read): no gates'}. Hover a token for its values.</p>
<div class="controls">
<label>outcome <select id="outcome"><option value="all">all</option><option value="success">successes</option><option value="failure">failures</option></select></label>
<label><input type="checkbox" id="parse-failures"> parse failures only</label>
<label>order <select id="sort"><option value="id">by trajectory</option><option value="shift">largest shift first</option></select></label>
<span class="muted"><span id="count">${data.trajectories.length}</span> shown</span>
</div>
<div id="trajectories">${data.trajectories.map(trajectoryBlock)}</div>
</main>`
  return page({ title, body, style: STYLE, script: SCRIPT })
}
