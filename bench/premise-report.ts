// The premise check's section of learning.md (issue 46, docs/benchmarks.md §3.8): one row per design measured by
// bench/skill-reading.mts (its lines in bench/results/skill-reading.jsonl), the bar beside each figure.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { GapFigure, SkillGapResult } from '../compute/skill-gap.ts'

/** The bar of issue 46: own skill − another task's, per response, at the start checkpoint on held-out tasks. */
export const PREMISE_BAR_NATS = 0.5

interface DesignLine {
  label: string
  date: string
  seed: number
  set?: string[]
  /** bench/skill-reading.mts --numbered-moves: the oracle skill's moves numbered (a probe, not a run setting) */
  numberedMoves?: boolean
  warmstart: { seconds: number; checks: Array<{ step: number; successRate: number }> }
  skillGap: SkillGapResult
  validationSuccess: { tasks: number; success: number | null }
}

const signed = (x: number, digits = 3) => `${x >= 0 ? '+' : '−'}${Math.abs(x).toFixed(digits)}`
const gapCell = (g: GapFigure | null) =>
  g ? `${signed(g.perStep)} (${signed(g.perTask)} ± ${g.half.toFixed(3)}; ${g.positive}/${g.tasks})` : 'n/a'

/** Whether a premise figure (own − another task's skill) reaches the bar. */
const barCell = (ownVsOther: GapFigure) => (ownVsOther.perStep >= PREMISE_BAR_NATS ? 'met' : 'missed')

interface FollowLine {
  label: string
  numbered: boolean
  steps: number
  byOffset: Record<'-1' | '0' | '1', { edits: number; shift: number; probEdited: number; probOwn: number }>
  followRate: number
  expertTop: number
}

const jsonLines = <T>(path: string): T[] =>
  existsSync(path)
    ? readFileSync(path, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as T)
    : []

/** bench/skill-follow.mts's lines: does a checkpoint follow an edit of its skill's move at the current step? */
function followTable(path: string): string[] {
  const lines = jsonLines<FollowLine>(path)
  if (lines.length === 0) return []
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`
  const cell = (o: FollowLine['byOffset']['0']) => `${signed(o.shift)} (${pct(o.probOwn)} → ${pct(o.probEdited)})`
  return [
    'Why the gap is small: `node --import tsx bench/skill-follow.mts --label <design> --checkpoint <folder>` (the',
    "folder `--keep` wrote). At step k of the expert's episode the own skill's move at position j is edited to another",
    'action b; the cells give how far log p(b) moves, in nats per response, and p(b) under the own skill → under the',
    'edit. A policy that reads move k moves toward b at j = k and not at j = k ± 1. Follow rate: how often b becomes',
    "the most likely of the four moves under the edit at k; the last column: how often the expert's move is the most",
    'likely under the own skill.',
    '',
    '| design | steps | edit at k−1 | edit at k | edit at k+1 | follow rate | expert’s move on top |',
    '|---|---|---|---|---|---|---|',
    ...lines.map(
      (f) =>
        `| ${f.label} | ${f.steps} | ${cell(f.byOffset['-1'])} | ${cell(f.byOffset['0'])} | ${cell(f.byOffset['1'])} | ` +
        `${pct(f.followRate)} | ${pct(f.expertTop)} |`,
    ),
    '',
  ]
}

/** `seedflow eval --skill-gap --out` of a benchmark start (cli/eval-command.ts SkillGapReport, the fields read here). */
interface StartGap {
  checkpoint: unknown
  split: string
  seeds: { from: number; to: number }
  result: SkillGapResult
}

/**
 * The premise at the learning benchmark's starts: one `seedflow eval --run <start> --iteration <base|stage1>
 * --skill-gap --out <dir>/<run>-<iteration>.json` per file in `dir` (the contrastive start's base and Stage 1 of
 * each seed, docs/benchmarks.md §3.8), the bar beside each.
 */
function startsTable(dir: string): string[] {
  if (!existsSync(dir)) return []
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
  if (files.length === 0) return []
  const rows = files.map((f) => {
    const r = JSON.parse(readFileSync(join(dir, f), 'utf8')) as StartGap
    const g = r.result.gaps
    return (
      `| ${f.replace(/\.json$/, '')} | ${r.split} ${r.seeds.from}–${r.seeds.to - 1} (${r.result.won} won, ${r.result.steps} steps) | ` +
      `${gapCell(g.ownVsOther)} | ${gapCell(g.ownVsNone)} | ${gapCell(g.ruleVsNone)} | ${barCell(g.ownVsOther)} |`
    )
  })
  return [
    "At the learning benchmark's starts (`npm run bench:learning -- --prefix cs …`, the contrastive start:",
    '`skillBlind 0.5`, `skillDetours 0.3`, 720 steps; its legs in learning-contrastive.md here), each checked by',
    '`seedflow eval --run <start run> --iteration <base|stage1> --skill-gap --split validation --seeds 0:200 --out',
    `${dir}/<run>-<iteration>.json\`:`,
    '',
    '| start, checkpoint | tasks | own − another | own − none | own rule − none | bar |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
  ]
}

export function premiseSection(linesPath: string): string {
  const lines = jsonLines<DesignLine>(linesPath)
  if (lines.length === 0) return ''
  const rows = lines.map((d) => {
    const g = d.skillGap.gaps
    const last = d.warmstart.checks.at(-1)
    const stopped = last ? `step ${last.step}` : '–'
    const success = d.validationSuccess.success === null ? '–' : (100 * d.validationSuccess.success).toFixed(1)
    const settings = [...(d.numberedMoves ? ['numbered moves (probe)'] : []), ...(d.set ?? [])]
    return (
      `| ${d.label} | ${d.seed} | ${settings.join(', ') || 'preset'} | ${stopped}, ${Math.round(d.warmstart.seconds)} s | ` +
      `${success} | ${gapCell(g.ownVsOther)} | ${gapCell(g.ownVsNone)} | ${gapCell(g.ruleVsNone)} | ${barCell(g.ownVsOther)} |`
    )
  })
  return [
    '',
    '## The premise check: does the policy read what its skill says? (issue 46)',
    '',
    `\`node --import tsx bench/skill-reading.mts --label <design> [--set warmstart.<field>=<value>]\`: the CPU sokoban`,
    "preset's warm-start with the design's settings, then the premise check of its checkpoint (`seedflow eval",
    '--skill-gap`, compute/skill-gap.ts) on validation tasks 0–199: the expert plays each episode, and its whole',
    "response at every step is scored with the task's own oracle skill, another task's and none. Figures in nats per",
    'response, mean over steps (mean over tasks ± 95% interval; tasks above 0 of tasks won by the expert). The rule is',
    'the skill without its list of moves; sokoban gives every task the same rule sentence, so own rule − another',
    `task's rule is 0 by construction and only own rule − no skill is shown. Bar: own − another ≥ ${PREMISE_BAR_NATS} nats.`,
    '`numbered moves (probe)`: `--numbered-moves`, the oracle skill written "here the moves were 1 down, 2 left, …" in',
    "the warm-start's skills and the check's alike, so that the prompt's \"Step k\" points at its move.",
    'Validation success: 500 other validation tasks (seeds 10000–10499) at the evaluation temperature. The seconds are',
    "the warm-start's wall time on the shared 2-core machine, not a ratio measured side by side (the first two and",
    'detours-0.6-720 ran beside a CI run at lower priority; the numbered and larger designs beside each other, the',
    'numbered ones on 1 thread): a step costs about the same in every design of one model',
    "size, so the warm-start's cost is read from its steps. The first three rows stepped 256 whole sequences at once,",
    'the later ones in micro-batches of 32 as the warm-start phase does (the same step up to rounding).',
    '',
    '| design | seed | settings | warm-start stopped at | validation success | own − another | own − none | own rule − none | bar |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    ...followTable(join(dirname(linesPath), 'skill-follow.jsonl')),
    ...startsTable(join(dirname(linesPath), 'premise-starts')),
  ].join('\n')
}
