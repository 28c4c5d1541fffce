// Two checkpoints on the same held-out tasks, paired: the difference in success with its 95% interval over tasks
// (each task's outcome under B minus under A), from two `seedflow eval --out` reports of the same seeds.
//
//   npx seedflow eval <checkpoint A> --env sokoban --seeds 1000:2000 --out a.json
//   npx seedflow eval <checkpoint B> --env sokoban --seeds 1000:2000 --out b.json
//   node --import tsx bench/paired-eval.ts a.json b.json
import { readFile } from 'node:fs/promises'
import { pathToFileURL } from 'node:url'

interface Report {
  /** Where the checkpoint came from (`seedflow eval`'s resolved source: a folder, or a run's store key). */
  checkpoint: { location?: string; path?: string } | string
  env: string
  split: string
  tasks: Array<{ seed: number; success: boolean }>
}

export interface PairedDifference {
  tasks: number
  a: number
  b: number
  /** Mean of b − a over tasks, with the half-width of its normal 95% interval. */
  difference: number
  half: number
  /** Tasks only A solved, and only B. */
  onlyA: number
  onlyB: number
}

/** The checkpoint of a report, as a reader would name it. */
function label(r: Report): string {
  return typeof r.checkpoint === 'string'
    ? r.checkpoint
    : (r.checkpoint.location ?? r.checkpoint.path ?? JSON.stringify(r.checkpoint))
}

export function pairedDifference(a: Report, b: Report): PairedDifference {
  if (a.env !== b.env || a.split !== b.split)
    throw new Error(`not the same tasks: ${a.env}/${a.split} vs ${b.env}/${b.split}`)
  const bySeed = new Map(b.tasks.map((t) => [t.seed, t.success]))
  const diffs: number[] = []
  let sa = 0
  let sb = 0
  for (const t of a.tasks) {
    const other = bySeed.get(t.seed)
    if (other === undefined) throw new Error(`task seed ${t.seed} is in ${label(a)}'s report only`)
    sa += Number(t.success)
    sb += Number(other)
    diffs.push(Number(other) - Number(t.success))
  }
  const n = diffs.length
  const mean = diffs.reduce((s, d) => s + d, 0) / n
  const sd = Math.sqrt(diffs.reduce((s, d) => s + (d - mean) ** 2, 0) / Math.max(1, n - 1))
  return {
    tasks: n,
    a: sa / n,
    b: sb / n,
    difference: mean,
    half: (1.96 * sd) / Math.sqrt(n),
    onlyA: diffs.filter((d) => d < 0).length,
    onlyB: diffs.filter((d) => d > 0).length,
  }
}

async function main() {
  const [pathA, pathB] = process.argv.slice(2)
  if (!pathA || !pathB) throw new Error('usage: node --import tsx bench/paired-eval.ts <a.json> <b.json>')
  const [a, b] = await Promise.all([pathA, pathB].map(async (p) => JSON.parse(await readFile(p, 'utf8')) as Report))
  const d = pairedDifference(a as Report, b as Report)
  const pts = (x: number) => (100 * x).toFixed(1)
  console.log(`A ${label(a as Report)}: ${pts(d.a)}%   B ${label(b as Report)}: ${pts(d.b)}%`)
  console.log(
    `B − A over ${d.tasks} paired tasks: ${pts(d.difference)} ± ${pts(d.half)} points (95%); only A solved ${d.onlyA}, only B ${d.onlyB}`,
  )
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main()
