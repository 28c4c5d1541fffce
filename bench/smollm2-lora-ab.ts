// The units of a SmolLM2 LoRA iteration, BEFORE issue 42's trainer (commit f9489c5: the base weights fed to every
// train run and to every decode step of a LoRA policy, the JS AdamW over the adapters) and AFTER it (this tree: the
// base baked into the train and decode sessions, the adapters and their moments kept in the engine, clip + AdamW
// inside the train run), through the worker engine the product runs, at 2 ORT threads. The shape is the
// cpu-household-smollm2 preset's: SmolLM2-135M (random weights), LoRA r 16 (alpha 32) on all seven projections;
// a train step of 4 × 256 tokens (the unit of the warm-start, Stage 1 and the update) and a decode batch of 4 rows ×
// 300-token prompts + 40 tokens (one household rollout group: the unit of rollout, analyze and evaluate). A full
// preset run (~2¾ hours a tree on 2 cores) is out of a session's reach; these are what its phases are made of.
// Child processes alternate between the trees (before, after, then after, before, …); each makes a fresh engine.
// Writes bench/results/smollm2-lora-ab.json and .md.
//   git worktree add /tmp/seedflow-before f9489c5 && ln -s "$PWD/node_modules" /tmp/seedflow-before/node_modules
//   node --import tsx bench/smollm2-lora-ab.ts            # BENCH_REPEATS=2 children per tree
import { execFileSync } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { loadavg } from 'node:os'
import { fileURLToPath } from 'node:url'
import { mulberry32 } from '../envs/rng.ts'
import { initWeights } from '../policy/init.ts'
import { initLora, LORA_TARGETS, type LoraConfig } from '../policy/lora.ts'
import { BEFORE_TREE, childOrReport, say } from './before-after.ts'
import { beforeTree } from './engine-traffic-before.ts'
import { AFTER_TREE } from './engine-traffic-measure.ts'
import { minMedian } from './min-median.ts'
import { smollm2Config } from './smollm2-shape.ts'

const THREADS = Number(process.env.SEEDFLOW_THREADS ?? 2)
const REPEATS = Number(process.env.BENCH_REPEATS ?? 2)
const OUT = fileURLToPath(new URL('results/smollm2-lora-ab', import.meta.url))
const LORA: LoraConfig = { rank: 16, alpha: 32, dropout: 0, targets: [...LORA_TARGETS] }
const TRAIN = { B: 4, T: 256, steps: 3 }
const DECODE = { rows: 4, prompt: 300, tokens: 40, tokensAgain: 10 }

const FIGURES = {
  firstStep: 'train step 4 × 256, the first (graph built, session made)',
  step: 'train step 4 × 256',
  firstPrefill: 'prefill 4 × 300, the first (sessions made)',
  decodeStep: 'decode step, 4 rows',
  prefillAgain: 'prefill 4 × 300 after another train step',
  decodeStepAgain: 'decode step after another train step',
} as const
type Figure = keyof typeof FIGURES

interface ChildResult {
  tree: 'before' | 'after'
  seconds: Record<Figure, number[]>
  peakRssMiB: number
}

async function child(which: string): Promise<ChildResult> {
  if (which !== 'before' && which !== 'after') throw new Error(`--child before|after, got ${which}`)
  const tree = which === 'before' ? await beforeTree(BEFORE_TREE) : AFTER_TREE
  const config = { ...smollm2Config(), maxPositions: 512 }
  const weights = initWeights(config, mulberry32(2))
  const adapters = initLora(config, LORA, mulberry32(3))
  const engine = tree.createWorkerEngine(THREADS)
  const seconds = Object.fromEntries(Object.keys(FIGURES).map((k) => [k, []])) as unknown as Record<Figure, number[]>
  const timed = async <T>(figure: Figure, f: () => Promise<T>): Promise<T> => {
    const started = performance.now()
    const value = await f()
    seconds[figure].push((performance.now() - started) / 1000)
    return value
  }
  try {
    const policy = tree.policy(engine, config, weights, { config: LORA, adapters })
    const rng = mulberry32(4)
    const ids = (n: number) => Array.from({ length: n }, () => Math.floor(rng.next() * config.vocabSize))
    const feeds = policy.trainFeeds(
      Array.from({ length: TRAIN.B }, () => {
        const sequence = ids(TRAIN.T + 1)
        return { context: sequence.slice(0, 1), response: sequence.slice(1) }
      }),
    )
    await timed('firstStep', async () => policy.step(await policy.trainModel(), feeds))
    const train = await policy.trainModel()
    for (let i = 0; i < TRAIN.steps; i++) await timed('step', () => policy.step(train, feeds))
    const specs = (seed: number) =>
      Array.from({ length: DECODE.rows }, (_, i) => ({
        prompt: ids(DECODE.prompt),
        temperature: 1,
        rng: mulberry32(seed + i),
      }))
    const decode = async (prefill: Figure, step: Figure, tokens: number, seed: number) => {
      const batch = policy.decodeBatch({ rows: DECODE.rows, capacity: DECODE.prompt + DECODE.tokens })
      await timed(prefill, () => batch.admit(specs(seed)))
      for (let t = 0; t < tokens; t++) await timed(step, () => batch.step())
      await batch.close()
    }
    await decode('firstPrefill', 'decodeStep', DECODE.tokens, 100)
    await policy.step(train, feeds) // a new version of the adapters
    await decode('prefillAgain', 'decodeStepAgain', DECODE.tokensAgain, 200)
    return { tree: which, seconds, peakRssMiB: process.resourceUsage().maxRSS / 1024 }
  } finally {
    await engine.close()
  }
}

const stat = (xs: number[]) => {
  const { min, median } = minMedian(xs)
  return { min, median, count: xs.length }
}

interface Report {
  date: string
  threads: number
  repeats: number
  loadAverage: { before: number[]; after: number[] }
  summary: Record<Figure, { before: ReturnType<typeof stat>; after: ReturnType<typeof stat> }>
  peakRssMiB: { before: number[]; after: number[] }
}

function render(report: Report): string {
  const f = (x: { min: number; median: number }) => `${x.min.toFixed(3)} / ${x.median.toFixed(3)}`
  const rows = (Object.keys(FIGURES) as Figure[]).map((k) => {
    const { before, after } = report.summary[k]
    return (
      `| ${FIGURES[k]} | ${f(before)} | ${f(after)} | ${(before.min / after.min).toFixed(2)}× / ` +
      `${(before.median / after.median).toFixed(2)}× | ${before.count} / ${after.count} |`
    )
  })
  const rss = (xs: number[]) => xs.map((x) => (x / 1024).toFixed(2)).join(', ')
  return `${[
    '# SmolLM2 LoRA: a train step and a decode step, before and after the resident trainer (issue 42)',
    '',
    `Written by \`node --import tsx bench/smollm2-lora-ab.ts\` on ${report.date.slice(0, 10)}: SmolLM2-135M's shape ` +
      '(random weights), LoRA r 16 (alpha 32) on all seven projections as in the cpu-household-smollm2 preset, ' +
      `through the worker engine at ${report.threads} ORT threads; BEFORE f9489c5 (the base fed to every train run ` +
      'and decode step, the JS AdamW), AFTER this tree (the base baked into the sessions, the adapters and moments ' +
      `kept in the engine, the optimizer in the graph); ${report.repeats} child processes per tree, alternating, ` +
      'each on a fresh engine. Seconds, min / median over every child’s measurements (count: how many).',
    '',
    '| figure | before s (min / median) | after s (min / median) | before ÷ after (min / median) | count before / after |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...rows,
    '',
    `Peak RSS of each child (GiB): before ${rss(report.peakRssMiB.before)}, after ${rss(report.peakRssMiB.after)}. ` +
      `Load average (1, 5, 15 min) before ${report.loadAverage.before.join(', ')}, after ` +
      `${report.loadAverage.after.join(', ')}.`,
    '',
  ].join('\n')}\n`
}

async function main(): Promise<void> {
  if (await childOrReport(OUT, child, render)) return
  const runs: Record<'before' | 'after', ChildResult[]> = { before: [], after: [] }
  const loadBefore = loadavg().map((x) => Number(x.toFixed(2)))
  for (let i = 0; i < REPEATS; i++) {
    const order: Array<'before' | 'after'> = i % 2 === 0 ? ['before', 'after'] : ['after', 'before']
    for (const tree of order) {
      const out = execFileSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', tree], {
        encoding: 'utf8',
        maxBuffer: 1 << 24,
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      const r = JSON.parse(out.trim().split('\n').at(-1) as string) as ChildResult
      runs[tree].push(r)
      say(
        `${i + 1} ${tree}: train step ${stat(r.seconds.step).min.toFixed(2)} s, decode step ` +
          `${stat(r.seconds.decodeStep).median.toFixed(3)} s, peak ${(r.peakRssMiB / 1024).toFixed(2)} GiB`,
      )
    }
  }
  const all = (tree: 'before' | 'after', k: Figure) => runs[tree].flatMap((r) => r.seconds[k])
  const report: Report = {
    date: new Date().toISOString(),
    threads: THREADS,
    repeats: REPEATS,
    loadAverage: { before: loadBefore, after: loadavg().map((x) => Number(x.toFixed(2))) },
    summary: Object.fromEntries(
      (Object.keys(FIGURES) as Figure[]).map((k) => [
        k,
        { before: stat(all('before', k)), after: stat(all('after', k)) },
      ]),
    ) as Report['summary'],
    peakRssMiB: { before: runs.before.map((r) => r.peakRssMiB), after: runs.after.map((r) => r.peakRssMiB) },
  }
  await writeFile(`${OUT}.json`, `${JSON.stringify({ ...report, runs }, null, 2)}\n`)
  await writeFile(`${OUT}.md`, render(report))
  say(`wrote ${OUT}.json and ${OUT}.md`)
}

await main()
