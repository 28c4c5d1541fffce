// Bytes that cross into and out of the WORKER engine (createWorkerEngine, what the product runs) per train step and
// per decode step, BEFORE issue 42's trainer (commit f9489c5: weights fed to every run, gradients fetched, JS AdamW)
// and AFTER it (this tree: the trained tensors and AdamW's moments kept in the engine, the optimizer in the graph),
// on the main job's model and on SmolLM2-135M's shape with LoRA r 16 (q_proj, v_proj) and fully fine-tuned. Each
// count is engine/metered.ts's wrapper around the engine (bench/engine-traffic-measure.ts): a train step after one
// warm-up step, then a DecodeBatch of 8 rows admitting 32-token prompts (the prefill) and one `step()`. The counts are
// deterministic, so BEFORE and AFTER come from separate child processes (the old tree's through
// bench/engine-traffic-before.ts, run against a git worktree of f9489c5). Writes bench/results/engine-traffic.json
// and .md.
//   git worktree add /tmp/seedflow-before f9489c5 && ln -s "$PWD/node_modules" /tmp/seedflow-before/node_modules
//   node --import tsx bench/engine-traffic.ts [models...]        # default: main smollm2-lora smollm2-full
//   SEEDFLOW_BEFORE_TREE=/elsewhere node --import tsx bench/engine-traffic.ts main
//   git worktree remove /tmp/seedflow-before
import { execFileSync } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { loadavg } from 'node:os'
import { fileURLToPath } from 'node:url'
import { BEFORE_TREE, childOrReport, say } from './before-after.ts'
import {
  AFTER_TREE,
  DECODE,
  measureTraffic,
  TRAFFIC_MODELS,
  TRAFFIC_THREADS,
  type TrafficCount,
  type TrafficResult,
} from './engine-traffic-measure.ts'

const OUT = fileURLToPath(new URL('results/engine-traffic', import.meta.url))

function child(tree: 'before' | 'after', key: string): TrafficResult {
  const args =
    tree === 'before'
      ? [fileURLToPath(new URL('engine-traffic-before.ts', import.meta.url)), BEFORE_TREE, key]
      : [fileURLToPath(import.meta.url), '--child', key]
  const out = execFileSync(process.execPath, ['--import', 'tsx', ...args], {
    encoding: 'utf8',
    maxBuffer: 1 << 24,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  return JSON.parse(out.trim().split('\n').at(-1) as string) as TrafficResult
}

const MiB = (bytes: number) => bytes / 2 ** 20
const fmt = (bytes: number) => {
  const x = MiB(bytes)
  return x === 0 ? '0' : x >= 1 ? x.toFixed(1) : x >= 0.01 ? x.toFixed(3) : x.toExponential(1)
}
const ratio = (a: number, b: number) => {
  if (b === 0) return a === 0 ? '—' : '∞'
  const r = a / b
  return r >= 1000 ? `${r.toExponential(1)}×` : `${r.toFixed(r >= 10 ? 0 : 1)}×`
}

function table(before: TrafficResult, after: TrafficResult): string[] {
  const rows: Array<[string, 'trainStep' | 'decodeStep' | 'nextDecodeStep' | 'prefill' | 'prefillAgain']> = [
    ['train step', 'trainStep'],
    ['decode step (first)', 'decodeStep'],
    ['decode step (next)', 'nextDecodeStep'],
    ['prefill (first)', 'prefill'],
    ['prefill (after the next train step)', 'prefillAgain'],
  ]
  const lines = [
    '| per | fed MiB before | fed MiB after | ratio | of which state before / after | fetched MiB before | fetched MiB after | kept MiB before / after | loaded MiB before / after |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ]
  for (const [label, k] of rows) {
    const b: TrafficCount = before[k]
    const a: TrafficCount = after[k]
    lines.push(
      `| ${label} | ${fmt(b.fedBytes)} | ${fmt(a.fedBytes)} | ${ratio(b.fedBytes, a.fedBytes)} | ` +
        `${fmt(b.fedStateBytes)} / ${fmt(a.fedStateBytes)} | ${fmt(b.fetchedBytes)} | ${fmt(a.fetchedBytes)} | ` +
        `${fmt(b.keptBytes)} / ${fmt(a.keptBytes)} | ${fmt(b.loadedBytes)} / ${fmt(a.loadedBytes)} |`,
    )
  }
  return lines
}

interface Report {
  date: string
  threads: number
  models: Record<string, { before: TrafficResult; after: TrafficResult }>
}

/** The markdown of a report (bench/results/engine-traffic.md). */
function render(report: Report): string {
  const md = [
    '# Bytes through the worker engine per step, before and after the resident trainer (issue 42)',
    '',
    `Written by \`node --import tsx bench/engine-traffic.ts\` on ${report.date.slice(0, 10)}, ` +
      `${report.threads} ORT threads. BEFORE: commit f9489c5 (weights fed to every score and train run, every ` +
      'gradient fetched, the JS AdamW; decode weights kept by fingerprint); AFTER: this tree (the trained tensors ' +
      "and AdamW's moments kept in the engine, clip + AdamW inside the train run, a LoRA base baked into the " +
      "sessions). Every figure is a count of engine/metered.ts's wrapper around `createWorkerEngine`, the engine " +
      'the product runs: the bytes that cross between the caller and the engine thread. Counts are deterministic, ' +
      'so each tree ran in its own process. Train step: the second `trainStep` / `trainer.step` (the first is the ' +
      `warm-up) of a mean-NLL loss; prefill: a DecodeBatch of ${DECODE.rows} rows admitting ${DECODE.prompt}-token ` +
      'prompts right after that step (so a tree that keeps decode weights by version keeps them again here); ' +
      'decode step (first): its first `step()`, which loads the step session; (next): the `step()` after it, ' +
      'what every further step sends; prefill (after the next train step): one more train step, then the same ' +
      'prompts admitted into a new DecodeBatch (its sessions exist: what a new policy version costs). ' +
      `"state": the part of the feeds that is weights, adapters, AdamW's moments ` +
      'and rotary tables; "kept": tensors handed to the engine to keep (`keep`); "loaded": model bytes (`load`, ' +
      'initializers baked in included). With LoRA, AFTER, the base crosses only as the initializers of the ' +
      'sessions it is baked into (train, prefill and step: the "loaded" column, once per base per worker process) ' +
      'and no run feeds it.',
    '',
  ]
  for (const [key, { before, after }] of Object.entries(report.models)) {
    const m = TRAFFIC_MODELS[key]
    md.push(
      `## ${m?.name} (${(before.parameters / 1e6).toFixed(2)}M parameters, ${(after.trainedParameters / 1e6).toFixed(3)}M trained)`,
      '',
      `${m?.note}.`,
      '',
      ...table(before, after),
      '',
      `Runs per train step ${before.trainStep.runs} / ${after.trainStep.runs}; per decode step ` +
        `${before.decodeStep.runs} / ${after.decodeStep.runs}. Setup (policy, train graph, warm-up step): fed ` +
        `${fmt(before.setup.fedBytes)} / ${fmt(after.setup.fedBytes)} MiB, kept ${fmt(before.setup.keptBytes)} / ` +
        `${fmt(after.setup.keptBytes)} MiB, loaded ${fmt(before.setup.loadedBytes)} / ${fmt(after.setup.loadedBytes)} MiB ` +
        `(before / after). Wall seconds of the counted train step ${before.seconds.trainStep.toFixed(2)} / ` +
        `${after.seconds.trainStep.toFixed(2)} (one step each, not a timing benchmark).`,
      '',
    )
  }
  return `${md.join('\n')}\n`
}

async function main(): Promise<void> {
  if (await childOrReport(OUT, (key) => measureTraffic(AFTER_TREE, key), render)) return
  const keys = process.argv.slice(2).length > 0 ? process.argv.slice(2) : Object.keys(TRAFFIC_MODELS)
  const load = { before: loadavg() }
  const results: Array<{ key: string; before: TrafficResult; after: TrafficResult }> = []
  for (const key of keys) {
    const before = child('before', key)
    say(
      `${key} before: train step fed ${fmt(before.trainStep.fedBytes)} MiB, fetched ${fmt(before.trainStep.fetchedBytes)} MiB`,
    )
    const after = child('after', key)
    say(
      `${key} after: train step fed ${fmt(after.trainStep.fedBytes)} MiB, fetched ${fmt(after.trainStep.fetchedBytes)} MiB`,
    )
    results.push({ key, before, after })
  }
  load.before = load.before.map((x) => Number(x.toFixed(2)))
  const report = {
    date: new Date().toISOString(),
    threads: TRAFFIC_THREADS,
    engine: 'createWorkerEngine wrapped by engine/metered.ts meteredEngine (the same wrapper for both trees)',
    before: 'f9489c5',
    decode: DECODE,
    loadAverage: { before: load.before, after: loadavg().map((x) => Number(x.toFixed(2))) },
    models: Object.fromEntries(
      results.map((r) => [r.key, { ...TRAFFIC_MODELS[r.key], before: r.before, after: r.after }]),
    ),
  }
  await writeFile(`${OUT}.json`, `${JSON.stringify(report, null, 2)}\n`)
  await writeFile(`${OUT}.md`, render(report))
  say(`wrote ${OUT}.json and ${OUT}.md`)
}

await main()
