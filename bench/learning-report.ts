// The learning benchmark's report: a markdown table (warm-start, Stage 1 and final success per row, mean ± 95%
// interval over training seeds, per test split, and SEED − GRPO paired by seed) and a learning-curve plot (success
// vs RL iterations, mean and 95% band over seeds), both written beside the results JSON. Rebuilt from the JSON
// alone: `node --import tsx bench/learning-report.ts [bench/results/learning.json]`.
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { vegaLiteSvg } from '../report/vega-svg.ts'
import { diagnosticsSection, type LegDiagnostics, readLegDiagnostics } from './learning-diagnostics.ts'
import { limitsSection, OPD_OFF, OPD_OFF_ROW, SEED_ROW, type SeedDifference, UPPER_ROW } from './learning-limits.ts'
import { premiseSection } from './premise-report.ts'
import { seedInterval, showInterval } from './seed-interval.ts'

export interface LearningEntry {
  /** RL iterations done (updates): 0 for the warm-start and Stage 1 checkpoints. */
  iteration: number
  split: string
  checkpoint: 'warm-start' | 'stage1' | 'iteration'
  /** Micro average: success over all evaluated episodes. */
  success: number
  /** Macro average: the mean of the per-family success rates (absent in results from before it was recorded). */
  macro?: number
  /** How many task families the evaluation covered (absent in results from before it was recorded). */
  families?: number
  score: number
  episodes: number
  /** sha256 of the evaluated checkpoint's model file (absent in results from before it was recorded). */
  checkpointSha256?: string
}

/** env → row → training seed → evaluations. */
export type LearningResults = Record<string, Record<string, Record<string, LearningEntry[]>>>

/** Which average of an evaluation: micro (over episodes) or macro (the mean over task families). */
export type Average = 'micro' | 'macro'

const value = (e: LearningEntry, average: Average) => (average === 'micro' ? e.success : (e.macro ?? null))

/**
 * One seed's success on a split: the start checkpoints, or the final one (the last iteration evaluated there;
 * Stage 2 results are always the final iteration's, never the best of several).
 */
function pick(
  entries: readonly LearningEntry[],
  split: string,
  which: 'warm-start' | 'stage1' | 'final',
  average: Average,
) {
  const onSplit = entries.filter((e) => e.split === split)
  if (which !== 'final') {
    const start = onSplit.find((e) => e.checkpoint === which)
    return start ? value(start, average) : null
  }
  const last = onSplit.filter((e) => e.checkpoint === 'iteration').sort((a, b) => b.iteration - a.iteration)[0]
  return last ? value(last, average) : null
}

const picked = (
  seeds: Record<string, LearningEntry[]>,
  split: string,
  which: 'warm-start' | 'stage1' | 'final',
  average: Average,
) =>
  Object.values(seeds)
    .map((e) => pick(e, split, which, average))
    .filter((x): x is number => x !== null)

function over(
  seeds: Record<string, LearningEntry[]>,
  split: string,
  which: 'warm-start' | 'stage1' | 'final',
  average: Average,
) {
  const xs = picked(seeds, split, which, average)
  return xs.length > 0 ? seedInterval(xs) : null
}

function testSplits(rows: Record<string, Record<string, LearningEntry[]>>): string[] {
  const splits = new Set<string>()
  for (const seeds of Object.values(rows))
    for (const entries of Object.values(seeds)) for (const e of entries) splits.add(e.split)
  return ['test-seen', 'test-unseen', 'validation'].filter((s) => splits.has(s))
}

/** Whether two legs of one seed evaluated the same warm-start checkpoint (unknown in old results: assumed). */
function sameStart(a: readonly LearningEntry[], b: readonly LearningEntry[]): boolean {
  const sha = (entries: readonly LearningEntry[]) =>
    entries.find((e) => e.checkpoint === 'warm-start')?.checkpointSha256
  const [x, y] = [sha(a), sha(b)]
  return x === undefined || y === undefined || x === y
}

/** A results key, `row` or `row[override,override]`, as its row and its sorted overrides. */
export function parseRowKey(key: string): { row: string; overrides: string[] } {
  const match = /^([^[]+)(?:\[(.*)\])?$/.exec(key)
  const overrides = match?.[2] ? match[2].split(',') : []
  return { row: match?.[1] ?? key, overrides: overrides.sort() }
}

/** Settings that shape the distillation term (or its teacher) alone: with λ_opd = 0 they change no update. */
const OPD_ONLY = ['stage2.opdCoef', 'stage2.opdBeta', 'stage2.opdGate', 'stage2.opdGateBaseline', 'stage2.oraclePlan']

/**
 * The paired comparisons of the rows of one environment, as [row, against] keys:
 * - every row against plain GRPO;
 * - the distillation: a row with OPD (`seed`, `seed-oracle`) against `seed` with `stage2.opdCoef=0` and the same
 *   overrides, less those that shape the term alone (the rows differ in the OPD term alone, or in the skill the
 *   teacher reads too);
 * - any other ablation `row[overrides]` against its plain row.
 */
export function comparisons(keys: readonly string[]): Array<[string, string]> {
  const pairs: Array<[string, string]> = []
  const parsed = new Map(keys.map((k) => [k, parseRowKey(k)]))
  const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i])
  const setting = (override: string) => override.slice(0, override.indexOf('='))
  for (const [key, { row, overrides }] of parsed) {
    if (key !== 'grpo' && parsed.has('grpo')) pairs.push([key, 'grpo'])
    if (!overrides.includes(OPD_OFF) && row !== 'grpo') {
      const without = [...overrides.filter((o) => !OPD_ONLY.includes(setting(o))), OPD_OFF].sort()
      for (const [other, o] of parsed) if (o.row === 'seed' && same(o.overrides, without)) pairs.push([key, other])
    }
    if (overrides.length > 0 && parsed.has(row) && !(row === 'seed' && overrides.includes(OPD_OFF)))
      pairs.push([key, row])
  }
  return pairs
}

/** `row` − `other` on the final checkpoints of their common seeds, with its t-interval (null: no common seed). */
export function pairedDifference(
  rows: Record<string, Record<string, LearningEntry[]>>,
  row: string,
  other: string,
  split: string,
  average: Average,
): SeedDifference | null {
  const seeds = rows[row] ?? {}
  const against = rows[other] ?? {}
  const common = Object.keys(seeds).filter((s) => against[s])
  const diffs = common
    .map((s) => {
      const a = pick(seeds[s] ?? [], split, 'final', average)
      const b = pick(against[s] ?? [], split, 'final', average)
      return a === null || b === null ? null : a - b
    })
    .filter((x): x is number => x !== null)
  if (diffs.length === 0) return null
  // a pair is only paired when both legs start from the same warm-start checkpoint (a store lost between
  // sessions makes the base again, which need not give the same weights)
  const unpaired = common.filter((s) => !sameStart(seeds[s] ?? [], against[s] ?? []))
  return { ...seedInterval(diffs), seeds: common, unpaired }
}

/** Whether an environment's results show macro averages too (several task families in some evaluation). */
function averagesOf(rows: Record<string, Record<string, LearningEntry[]>>): Average[] {
  // older results, without a family count: where the two averages differ; with one family they are the same number
  return Object.values(rows).some((seeds) =>
    Object.values(seeds).some((entries) =>
      entries.some((e) => e.macro !== undefined && ((e.families ?? 1) > 1 || e.macro !== e.success)),
    ),
  )
    ? ['micro', 'macro']
    : ['micro']
}

export function learningTable(results: LearningResults): string {
  const lines = [
    '| env | row | seeds | split | average | warm-start | Stage 1 | final | final − warm-start |',
    '|---|---|---|---|---|---|---|---|---|',
  ]
  const paired: string[] = []
  for (const [env, rows] of Object.entries(results)) {
    const averages = averagesOf(rows)
    for (const split of testSplits(rows)) {
      for (const average of averages) {
        for (const [row, seeds] of Object.entries(rows)) {
          const gains = Object.values(seeds)
            .map((e) => {
              const a = pick(e, split, 'final', average)
              const b = pick(e, split, 'warm-start', average)
              return a === null || b === null ? null : a - b
            })
            .filter((x): x is number => x !== null)
          lines.push(
            `| ${env} | ${row} | ${Object.keys(seeds).join(', ')} | ${split} | ${average} | ` +
              `${showInterval(over(seeds, split, 'warm-start', average))} | ${showInterval(over(seeds, split, 'stage1', average))} | ` +
              `${showInterval(over(seeds, split, 'final', average))} | ${showInterval(gains.length > 0 ? seedInterval(gains) : null)} |`,
          )
        }
        for (const [row, other] of comparisons(Object.keys(rows))) {
          const d = pairedDifference(rows, row, other, split, average)
          if (d !== null)
            paired.push(
              `- ${env}, ${split} (${average}): ${row} − ${other} = ${showInterval(d)} points (seeds ${d.seeds.join(', ')})` +
                (d.unpaired.length > 0 ? ` [different warm-start checkpoints: seeds ${d.unpaired.join(', ')}]` : ''),
            )
        }
      }
    }
  }
  return [
    'Held-out success in %, mean ± 95% t-interval over training seeds (no interval with one seed). `micro`: over',
    'all evaluated episodes; `macro`: the mean of the per-family rates, shown for environments with several task',
    'families (sokoban has one, so only micro is shown). Where an evaluation holds equally many tasks of each family',
    "(household: a task's family is its seed mod 6, so 300 tasks hold 50 of each) the two are equal by construction.",
    '"final" is the last iteration\'s checkpoint, never the best of several; the sha256 of every evaluated',
    'checkpoint is in the results JSON (`checkpointSha256`).',
    '',
    ...lines,
    '',
    'Paired by training seed (same warm-start and Stage 1): each row minus plain GRPO, each distillation row minus',
    '`seed` with the same settings and `stage2.opdCoef=0`, each other ablation minus its row:',
    '',
    ...(paired.length > 0 ? paired : ['- (no seed with both rows yet)']),
    '',
  ].join('\n')
}

/** Per environment with an upper-bound row: which limit its figures point to (bench/learning-limits.ts). */
export function limits(results: LearningResults, diagnostics: readonly LegDiagnostics[], start?: string): string {
  return Object.entries(results)
    .map(([env, rows]) => {
      const splits = testSplits(rows)
      const split = splits.includes('test-unseen') ? 'test-unseen' : (splits[0] ?? 'test-seen')
      const average = averagesOf(rows).includes('macro') ? 'macro' : 'micro'
      return limitsSection({
        env,
        split,
        average,
        upper: pairedDifference(rows, UPPER_ROW, OPD_OFF_ROW, split, average),
        distill: pairedDifference(rows, SEED_ROW, OPD_OFF_ROW, split, average),
        legs: diagnostics.filter((d) => d.env === env),
        ...(start ? { start } : {}),
      })
    })
    .join('')
}

/** Learning-curve points: per env, row and iteration on the curve split, mean and 95% band over seeds. */
export function curvePoints(results: LearningResults) {
  const points: Array<{ env: string; row: string; iteration: number; mean: number; low: number; high: number }> = []
  for (const [env, rows] of Object.entries(results)) {
    const split = env === 'household' ? 'test-unseen' : 'test-seen'
    for (const [row, seeds] of Object.entries(rows)) {
      const byIteration = new Map<number, number[]>()
      for (const entries of Object.values(seeds)) {
        const start =
          entries.find((e) => e.split === split && e.checkpoint === 'stage1') ??
          entries.find((e) => e.split === split && e.checkpoint === 'warm-start')
        const chosen = [start, ...entries.filter((e) => e.split === split && e.checkpoint === 'iteration')]
        for (const e of chosen)
          if (e) byIteration.set(e.iteration, [...(byIteration.get(e.iteration) ?? []), e.success])
      }
      for (const [iteration, xs] of [...byIteration].sort((a, b) => a[0] - b[0])) {
        const m = seedInterval(xs)
        const half = m.half ?? 0
        points.push({
          env,
          row,
          iteration,
          mean: 100 * m.mean,
          // a success rate stays in [0, 100]: the t-band of two or three seeds can reach past both ends
          low: Math.max(0, 100 * (m.mean - half)),
          high: Math.min(100, 100 * (m.mean + half)),
        })
      }
    }
  }
  return points
}

export async function learningPlot(results: LearningResults): Promise<string> {
  const values = curvePoints(results)
  const color = { field: 'row', type: 'nominal', title: 'row', legend: { labelLimit: 400 } }
  const x = { field: 'iteration', type: 'quantitative', title: 'RL iterations (updates)' }
  const spec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    data: { values },
    facet: { column: { field: 'env', type: 'nominal', title: null } },
    spec: {
      width: 360,
      height: 240,
      layer: [
        {
          mark: { type: 'area', opacity: 0.2 },
          encoding: { x, y: { field: 'low', type: 'quantitative' }, y2: { field: 'high' }, color },
        },
        {
          mark: { type: 'line', point: true },
          encoding: {
            x,
            y: { field: 'mean', type: 'quantitative', title: 'held-out success (%)', scale: { domain: [0, 100] } },
            color,
          },
        },
      ],
    },
  }
  return vegaLiteSvg(spec)
}

/** Every leg of a results file as [env, row, seed]. */
const legsOf = (results: LearningResults) =>
  Object.entries(results).flatMap(([env, rows]) =>
    Object.entries(rows).flatMap(([row, seeds]) =>
      Object.keys(seeds).map((seed): [string, string, string] => [env, row, seed]),
    ),
  )

/** The skill-reading start's results (issue 46), whose rows the main report sets beside its own. */
export const SKILL_READING_RESULTS = 'learning-contrastive'

/**
 * The comparison again from the start that reads its skills (issue 46): the rows, their paired differences and
 * which limit they point to, rebuilt from `<dir>/learning-contrastive.json` ('' where it does not exist).
 */
export function skillReadingSection(dir: string): string {
  const stem = join(dir, SKILL_READING_RESULTS)
  if (!existsSync(`${stem}.json`)) return ''
  const results = JSON.parse(readFileSync(`${stem}.json`, 'utf8')) as LearningResults
  const diagnostics = readLegDiagnostics(`${stem}-runs`, legsOf(results))
  return [
    '',
    '## The comparison from the skill-reading start (issue 46)',
    '',
    `The same rows forked from the starts checked above (\`--prefix cs\`, Stage 1 at \`stage1.lr\` 1e-4), run with`,
    "`--control-gap`; each leg's per-iteration diagnostics are in",
    `${SKILL_READING_RESULTS}.md.`,
    '',
    learningTable(results) + limits(results, diagnostics, 'from the skill-reading start'),
  ].join('\n')
}

/**
 * Writes learning.md (with the legs' diagnostics from `<stem>-runs/`, where that folder exists) and learning.svg
 * beside the results file, and returns the paths written. The skill-reading start's results rewrite the main
 * report beside them too, which sets their rows beside its own.
 */
export async function writeLearningReport(resultsPath: string, results: LearningResults): Promise<string[]> {
  const stem = resultsPath.replace(/\.json$/, '')
  const diagnostics = readLegDiagnostics(`${stem}-runs`, legsOf(results))
  // the main results carry the premise check of the skill-reading designs and the rows from that start (issue 46)
  const dir = dirname(stem)
  const premise =
    basename(stem) === 'learning' ? premiseSection(join(dir, 'skill-reading.jsonl')) + skillReadingSection(dir) : ''
  writeFileSync(
    `${stem}.md`,
    learningTable(results) + diagnosticsSection(diagnostics) + limits(results, diagnostics) + premise,
  )
  writeFileSync(`${stem}.svg`, await learningPlot(results))
  const main = join(dir, 'learning.json')
  const alsoMain =
    basename(stem) === SKILL_READING_RESULTS && existsSync(main)
      ? await writeLearningReport(main, JSON.parse(readFileSync(main, 'utf8')) as LearningResults)
      : []
  return [`${stem}.md`, `${stem}.svg`, ...alsoMain]
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const path = process.argv[2] ?? 'bench/results/learning.json'
  await writeLearningReport(path, JSON.parse(readFileSync(path, 'utf8')) as LearningResults)
  console.log(readFileSync(path.replace(/\.json$/, '.md'), 'utf8'))
}
