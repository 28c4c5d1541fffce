// A worker's profile (workers/profile.ts) as tables: where the wall time and the memory of a run went, per activity
// and per model run. Measure, then read:
//
//   SEEDFLOW_PROFILE=/tmp/main-job.json npx seedflow run --run-id main-job-profile
//   node --import tsx bench/profile-report.ts /tmp/main-job.json [--top 12]
import { readFile } from 'node:fs/promises'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { ADAMW_IO } from '../engine/adamw-graph.ts'
import type { ModelTraffic } from '../engine/index.ts'
import { IO } from '../policy/model.ts'
import type { WorkerProfile } from '../workers/profile.ts'

/** What kind of graph a model is, from its outputs. */
export function graphKind(outputs: readonly string[]): string {
  const has = (name: string) => outputs.includes(name)
  if (has(ADAMW_IO.gradNorm)) return 'train step (loss, gradients, AdamW)'
  if (has(IO.loss)) return 'loss and gradients'
  if (outputs.some((o) => o.startsWith('new_k_t.'))) return 'decode'
  if (has(IO.tokenLogprobs)) return 'score'
  if (has(IO.logits)) return 'forward'
  return outputs.slice(0, 3).join(', ')
}

const gib = (bytes: number) => (bytes / 2 ** 30).toFixed(2)
const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1)
const sec = (ms: number) => (ms / 1000).toFixed(1)
const row = (cells: readonly (string | number)[]) => `| ${cells.join(' | ')} |`

/** Markdown tables of a profile: activities by wall time, then the `top` model runs by wall time. */
export function profileTables(p: WorkerProfile, top = 12): string {
  const lines = [
    `worker pid ${p.pid}, profiled from ${p.startedAt} for ${sec(p.wallMs)} s; peak RSS ${gib(p.peakRssBytes)} GiB`,
    '',
    row(['activity', 'executions', 'wall s', 'share of wall', 'engine s', 'peak RSS GiB']),
    row(['---', '---:', '---:', '---:', '---:', '---:']),
  ]
  const engineMs = (tag: string) => p.models.filter((m) => m.tag === tag).reduce((n, m) => n + m.ms, 0)
  for (const a of p.activities) {
    lines.push(
      row([
        a.activity,
        a.executions,
        sec(a.ms),
        `${((100 * a.ms) / p.wallMs).toFixed(1)}%`,
        sec(engineMs(a.activity)),
        gib(a.peakRssBytes),
      ]),
    )
  }
  lines.push(
    '',
    row(['activity', 'graph', 'model', 'runs', 'engine s', 'ms a run', 'MiB fed a run', 'MiB fetched a run']),
    row(['---', '---', '---', '---:', '---:', '---:', '---:', '---:']),
  )
  for (const m of p.models.slice(0, top) as ModelTraffic[]) {
    lines.push(
      row([
        m.tag || '(none)',
        graphKind(m.outputs),
        m.model.slice(0, 8),
        m.runs,
        sec(m.ms),
        (m.ms / m.runs).toFixed(1),
        mib(m.fedBytes / m.runs),
        mib(m.fetchedBytes / m.runs),
      ]),
    )
  }
  return lines.join('\n')
}

async function main() {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string' } } })
  const path = positionals[0]
  if (!path) throw new Error('usage: node --import tsx bench/profile-report.ts <profile.json> [--top N]')
  const profile = JSON.parse(await readFile(path, 'utf8')) as WorkerProfile
  console.log(profileTables(profile, values.top ? Number(values.top) : undefined))
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main()
