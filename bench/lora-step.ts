// Train step time and peak RSS with and without LoRA on SmolLM2-135M's shape (random weights), batch 4 × 256:
// the full step (every weight's gradient, clipping, AdamW over 135M parameters) against LoRA steps (adapter
// gradients only, AdamW over the adapters). Each variant runs in its own child process, so each peak RSS is its
// own; the variants take turns over BENCH_ROUNDS rounds (a busy machine's load drifts), and each figure is the best
// and the median over every round's steps. A step is `trainer.step` (policy/trainer.ts): one run whose graph holds
// the clipping and AdamW (the optimizer is inside the graph now, not JS after the run), the trained tensors (every
// weight, or the adapters over a base baked into the session) and their moments kept in the engine. Writes
// bench/results/lora.json (SEEDFLOW_BENCH_OUT: there instead).
//   node --import tsx bench/lora-step.ts            # all variants
//   BENCH_ROUNDS=2 BENCH_REPEATS=2 SEEDFLOW_THREADS=2 node --import tsx bench/lora-step.ts
import { execFileSync } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { loadavg } from 'node:os'
import { fileURLToPath } from 'node:url'
import { createLocalEngine } from '../engine/index.ts'
import { mulberry32 } from '../envs/rng.ts'
import { initWeights } from '../policy/init.ts'
import { initLora, LORA_TARGETS, type LoraConfig } from '../policy/lora.ts'
import { meanNll } from '../policy/losses.ts'
import { parameterCount } from '../policy/parameters.ts'
import { Trainer } from '../policy/trainer.ts'
import { minMedian } from './min-median.ts'
import { smollm2Config } from './smollm2-shape.ts'

const THREADS = Number(process.env.SEEDFLOW_THREADS ?? 2)
const REPEATS = Number(process.env.BENCH_REPEATS ?? 2)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2)
const OUT = process.env.SEEDFLOW_BENCH_OUT ?? fileURLToPath(new URL('results/lora.json', import.meta.url))
const B = 4
const T = 256
const VARIANTS: Record<string, LoraConfig | null> = {
  full: null,
  'lora r8 q,v': { rank: 8, alpha: 8, dropout: 0, targets: ['q_proj', 'v_proj'] },
  'lora r8 all 7': { rank: 8, alpha: 16, dropout: 0, targets: LORA_TARGETS },
}

async function child(name: string): Promise<void> {
  const lora = VARIANTS[name]
  if (lora === undefined) throw new Error(`unknown variant ${name}`)
  const c = { ...smollm2Config(), maxPositions: 512 }
  const weights = initWeights(c, mulberry32(2))
  const engine = createLocalEngine({ threads: THREADS })
  const trainer = new Trainer(
    engine,
    c,
    weights,
    lora ? { lora: { config: lora, adapters: initLora(c, lora, mulberry32(3)) } } : {},
  )
  const model = trainer.model
  const rng = mulberry32(4)
  const items = Array.from({ length: B }, () => {
    const ids = Array.from({ length: T + 1 }, () => 3 + Math.floor(rng.next() * (c.vocabSize - 3)))
    return { context: ids.slice(0, 1), response: ids.slice(1) }
  })
  const batch = model.tokenBatch(items, 1)
  const feeds = { ...batch.feeds, mask: model.float([batch.B, batch.T], batch.responseMask) }
  let started = performance.now()
  const train = await trainer.trainModel(meanNll)
  const loadSeconds = (performance.now() - started) / 1000
  const seconds: number[] = []
  for (let i = 0; i <= REPEATS; i++) {
    started = performance.now()
    await trainer.step(train, feeds, { lr: 1e-5, maxGradNorm: 1, weightDecay: 0.01 })
    if (i > 0) seconds.push((performance.now() - started) / 1000) // the first step is the warm-up
  }
  const trainable = trainer.trainedSpecs().reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0)
  process.stdout.write(
    `${JSON.stringify({
      variant: name,
      trainableParameters: trainable,
      optimizerStateMiB: (2 * trainable * 4) / 2 ** 20,
      graphLoadSeconds: loadSeconds,
      stepSeconds: minMedian(seconds),
      peakRssMiB: process.resourceUsage().maxRSS / 1024,
    })}\n`,
  )
  await engine.close()
}

async function main(): Promise<void> {
  const only = process.argv.indexOf('--child')
  if (only >= 0) return child(process.argv[only + 1] as string)
  const c = smollm2Config()
  const before = loadavg()
  const runs: Record<
    string,
    Array<Record<string, unknown> & { stepSeconds: { all: number[] }; peakRssMiB: number }>
  > = {}
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of Object.keys(VARIANTS)) {
      const out = execFileSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', name], {
        encoding: 'utf8',
        maxBuffer: 1 << 24,
      })
      const run = JSON.parse(out.trim().split('\n').at(-1) as string)
      process.stdout.write(
        `round ${round + 1} ${name}: steps ${run.stepSeconds.all.map((x: number) => x.toFixed(2)).join(', ')} s, load ${(loadavg()[0] as number).toFixed(2)}\n`,
      )
      runs[name] = [...(runs[name] ?? []), run]
    }
  }
  const results = Object.entries(runs).map(([name, list]) => {
    const all = list.flatMap((r) => r.stepSeconds.all).sort((a, b) => a - b)
    const first = list[0] as Record<string, unknown>
    const result = {
      variant: name,
      trainableParameters: first.trainableParameters as number,
      optimizerStateMiB: first.optimizerStateMiB,
      graphLoadSeconds: list.map((r) => r.graphLoadSeconds),
      stepSeconds: { min: all[0] as number, median: all[Math.floor(all.length / 2)] as number, all },
      peakRssMiB: Math.max(...list.map((r) => r.peakRssMiB)),
    }
    process.stdout.write(
      `${name}: step ${result.stepSeconds.min.toFixed(2)} s (median ${result.stepSeconds.median.toFixed(2)}), ` +
        `peak RSS ${(result.peakRssMiB / 1024).toFixed(2)} GiB, ${(result.trainableParameters / 1e6).toFixed(2)}M trained\n`,
    )
    return result
  })
  const report = {
    date: new Date().toISOString(),
    shape: { name: 'SmolLM2-135M (random weights)', parameters: parameterCount(c), B, T },
    threads: THREADS,
    repeats: REPEATS,
    rounds: ROUNDS,
    step: 'trainer.step: one run of the train graph with clip + AdamW inside; each child: one warm-up step, then the timed repeats',
    loadAverage: { before, after: loadavg() },
    results,
  }
  await writeFile(OUT, `${JSON.stringify(report, null, 2)}\n`)
  process.stdout.write(`wrote ${OUT}\n`)
}

await main()
