// Where the oracle skill's teacher stands against the student inside `seed-oracle`'s iterations (issue 46,
// docs/benchmarks.md §3.8): per response, log π_teacher − log π_old (t − s) and log π_teacher − log π_control
// (t − c), on the steps that took the expert's action and on the others, split by whether the episode was still on
// the expert's path there (every earlier step took the expert's action). The oracle skill lists the expert's moves
// from the first state: on the path it fits the room, off it the list is stale (with `stage2.oraclePlan: step` it is
// replanned at each step, and steps the expert cannot win from have no teacher). Reads the stored rescore artifacts.
//
//   node --import tsx bench/oracle-path.mts <artifacts>/runs/<run id> [...]
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { decodeRescore } from '../records/rescore-format.ts'

const sum = (xs: Float64Array) => xs.reduce((a, b) => a + b, 0)

interface RolloutStep {
  action?: string
  valid: boolean
  expertAction?: string
}

/** Per trajectory id of one iteration, whether each step took the expert's action (as the rescore decides it). */
function expertSteps(rollouts: string): Map<number, boolean[]> {
  const byId = new Map<number, boolean[]>()
  for (const file of readdirSync(rollouts).filter((f) => f.endsWith('.jsonl.gz'))) {
    const lines = gunzipSync(readFileSync(join(rollouts, file)))
      .toString('utf8')
      .split('\n')
      .filter(Boolean)
    for (const line of lines) {
      const t = JSON.parse(line) as { id: number; steps: RolloutStep[] }
      if (byId.has(t.id)) throw new Error(`${rollouts}: trajectory ${t.id} in two shards`)
      byId.set(
        t.id,
        t.steps.map((s) => s.valid && s.expertAction !== undefined && s.action === s.expertAction),
      )
    }
  }
  return byId
}

/** Responses, and how many of them had a control score, with the sums of t − s and t − c over them. */
type Cell = { n: number; ts: number; nc: number; tc: number }
const cell = (): Cell => ({ n: 0, ts: 0, nc: 0, tc: 0 })
const show = (c: Cell) =>
  c.n === 0 ? '–' : `${(c.ts / c.n).toFixed(3)} / ${c.nc ? (c.tc / c.nc).toFixed(3) : '–'} (${c.n})`

const runs = process.argv.slice(2)
if (runs.length === 0) {
  console.error('usage: node --import tsx bench/oracle-path.mts <artifacts>/runs/<run id> [...]')
  process.exit(2)
}
console.log(
  '| run | expert action, on path | expert action, off path | other action, on path | other action, off path |',
)
console.log('|---|---|---|---|---|')
for (const run of runs) {
  const cells = { eOn: cell(), eOff: cell(), oOn: cell(), oOff: cell() }
  // trajectory ids are per iteration: each iteration's latest rescore attempt on its own
  for (const it of readdirSync(join(run, 'iterations')).sort()) {
    const dir = join(run, 'iterations', it, 'rescore')
    const latest = readdirSync(dir)
      .filter((f) => f.endsWith('.bin'))
      .sort()
      .at(-1)
    if (!latest) continue
    const samples = decodeRescore(readFileSync(join(dir, latest)), join(dir, latest))
    const expert = expertSteps(join(run, 'iterations', it, 'rollouts'))
    for (const s of samples) {
      const steps = expert.get(s.trajectory)
      if (!s.teacher || !steps) continue
      // on the path: every earlier step took the expert's action, so the plan from the first state still fits
      const path = steps.slice(0, s.step).every(Boolean)
      const c = steps[s.step] ? (path ? cells.eOn : cells.eOff) : path ? cells.oOn : cells.oOff
      const t = sum(s.teacher)
      c.n++
      c.ts += t - sum(s.old)
      if (s.control) {
        c.nc++
        c.tc += t - sum(s.control)
      }
    }
  }
  const name = run.split('/').filter(Boolean).at(-1)
  console.log(`| ${name} | ${show(cells.eOn)} | ${show(cells.eOff)} | ${show(cells.oOn)} | ${show(cells.oOff)} |`)
}
