// npm run bench:engine: engine and policy-model speed on this machine, written to bench/results/engine.json
// (its other sections, written by --compare, --memory, --profile and by hand, are kept).
// Reference shape (docs/benchmarks.md §7): 4 layers, d=256, 4 heads, ff=1024, vocab 8192, batch 16 × 256.
// The weights are a Trainer's (policy/trainer.ts), kept in the engine: no run is fed them. "train graph" is
// forward + backward returning every gradient (the trainer's gradient graph); "step" is `trainer.step`, one run
// whose graph holds the clipping and AdamW too (the optimizer is inside the graph now, not JS after the run).
// BENCH_REPEATS (default 3): timed repetitions per figure; SEEDFLOW_BENCH_OUT: write there instead.
import { existsSync } from 'node:fs'
import { readFile, writeFile } from 'node:fs/promises'
import { cpus } from 'node:os'
import { fileURLToPath } from 'node:url'
import { createLocalEngine } from '../engine/index.ts'
import { mulberry32 } from '../envs/rng.ts'
import { type ModelConfig, PRESETS } from '../policy/config.ts'
import { generate } from '../policy/generate.ts'
import { initWeights } from '../policy/init.ts'
import { meanNll } from '../policy/losses.ts'
import { parameterCount } from '../policy/parameters.ts'
import { Trainer } from '../policy/trainer.ts'
import { forwardFlops, matmulPeak, timeIt } from './flops.ts'

const compareAt = process.argv.indexOf('--compare')
if (compareAt >= 0) {
  // npm run bench:engine -- --compare torch [shape…]: side by side with PyTorch (bench/engine-compare.ts)
  if (process.argv[compareAt + 1] !== 'torch') throw new Error(`--compare: only 'torch' is supported`)
  const { compareWithTorch } = await import('./engine-compare.ts')
  const shapes = process.argv.slice(compareAt + 2)
  await compareWithTorch(shapes.length > 0 ? shapes : undefined)
  process.exit(0)
}

const profileAt = process.argv.indexOf('--profile')
if (profileAt >= 0) {
  // npm run bench:engine -- --profile [smollm2|bench]: ORT's profile of one train step (bench/profile-step.ts)
  const { profileStep } = await import('./profile-step.ts')
  await profileStep(process.argv[profileAt + 1])
  process.exit(0)
}

if (process.argv.includes('--memory')) {
  // npm run bench:engine -- --memory: peak RSS of a train step per graph layout (bench/train-memory.ts)
  const { trainMemory } = await import('./train-memory.ts')
  await trainMemory()
  process.exit(0)
}

const threads = Number(process.env.SEEDFLOW_THREADS ?? cpus().length)
const REPEATS = Number(process.env.BENCH_REPEATS ?? 3)
const OUT = process.env.SEEDFLOW_BENCH_OUT ?? fileURLToPath(new URL('./results/engine.json', import.meta.url))
const engine = createLocalEngine({ threads })
const c: ModelConfig = PRESETS.bench
const [B, T] = [16, 256]
const say = (line: string) => process.stdout.write(`${line}\n`)

const result: Record<string, unknown> = { shape: { ...c, batch: B, tokens: T, parameters: parameterCount(c) }, threads }
say(
  `seedflow engine benchmark: ${(parameterCount(c) / 1e6).toFixed(2)}M parameters, batch ${B}×${T}, ${threads} threads`,
)

const shapes: Array<[string, number, number, number]> = [
  ['qkv/o projection (B·T, C) × (C, C)', B * T, c.hiddenSize, c.hiddenSize],
  ['MLP up (B·T, C) × (C, F)', B * T, c.hiddenSize, c.intermediateSize],
  ['output layer (B·T, C) × (C, V)', B * T, c.hiddenSize, c.vocabSize],
]
const peaks: Record<string, number> = {}
for (const [name, M, K, N] of shapes) {
  peaks[name] = await matmulPeak(engine, M, K, N)
  say(`  MatMul ${name}: ${peaks[name]?.toFixed(1)} GFLOP/s`)
}
const peak = Math.max(...Object.values(peaks))
result.matmulPeakGflops = peak
result.matmulGflops = peaks

const trainer = new Trainer(engine, c, initWeights(c, mulberry32(2)))
const model = trainer.model
const weights = await trainer.kept()
const rng = mulberry32(3)
const items = Array.from({ length: B }, () => ({
  context: [1],
  response: Array.from({ length: T - 1 }, () => 3 + Math.floor(rng.next() * (c.vocabSize - 3))),
}))
const flops = forwardFlops(c, T) * B

const scoreModel = await model.scoreModel()
const batch = model.tokenBatch(items, 1)
const forwardSeconds = await timeIt(() => engine.run(scoreModel, batch.feeds, { kept: weights }), REPEATS)
result.forward = {
  seconds: forwardSeconds,
  tokensPerSecond: (B * T) / forwardSeconds,
  gflops: flops / forwardSeconds / 1e9,
}
say(
  `forward (per-token log-probs + entropy): ${forwardSeconds.toFixed(3)} s, ${((B * T) / forwardSeconds).toFixed(0)} tokens/s, ${(flops / forwardSeconds / 1e9).toFixed(1)} GFLOP/s`,
)

const gradientGraph = await model.gradientModel(meanNll)
const trainFeeds = { ...batch.feeds, mask: model.float([B, T], batch.responseMask) }
const runOnly = await timeIt(() => engine.run(gradientGraph, trainFeeds, { kept: weights }), REPEATS)
// one train session at a time (each holds its own arena, ~2.8 GiB here), as before the optimizer moved into the graph
await model.release()
const train = await trainer.trainModel(meanNll)
const fullStep = await timeIt(() => trainer.step(train, trainFeeds, { lr: 1e-4, maxGradNorm: 1 }), REPEATS)
const trainFlops = 3 * flops // backward counted as 2× forward
result.train = {
  graphSeconds: runOnly,
  stepSeconds: fullStep,
  tokensPerSecond: (B * T) / fullStep,
  gflops: trainFlops / runOnly / 1e9,
  fractionOfPeak: trainFlops / runOnly / 1e9 / peak,
  flopsFormula:
    'forward = L·(T·2·(C·H·D + 2·C·KV·D + H·D·C + 3·C·F) + 4·T²·H·D) + T·2·C·V per sequence, × B; train = 3 × forward (backward = 2 × forward); GFLOP/s over the graph run (loss + log-probs + every gradient)',
  step: 'trainer.step: one run of the train graph with global-norm clipping (1.0) and AdamW (lr 1e-4, wd 0.01) inside; the weights and moments stay in the engine',
}
say(
  `train step: graph ${runOnly.toFixed(3)} s (${(trainFlops / runOnly / 1e9).toFixed(1)} GFLOP/s = ${((100 * trainFlops) / runOnly / 1e9 / peak).toFixed(0)}% of the MatMul peak), with clip + AdamW in the graph ${fullStep.toFixed(3)} s, ${((B * T) / fullStep).toFixed(0)} tokens/s`,
)

const decode: Record<string, unknown> = {}
for (const sequences of [16, 64]) {
  const prompts = Array.from({ length: sequences }, () =>
    Array.from({ length: 256 }, () => 3 + Math.floor(rng.next() * (c.vocabSize - 3))),
  )
  const run = () =>
    generate(model, prompts, {
      maxNewTokens: 128,
      temperature: 1,
      eosIds: [],
      rngs: prompts.map((_, i) => mulberry32(i)),
    })
  await run() // warm-up
  const out = await run()
  decode[String(sequences)] = { ...out.stats, note: 'tokensPerSecond = sampled tokens / wall time, prefill included' }
  say(
    `decode ${sequences} × (256 prompt + 128 new): ${out.stats.seconds.toFixed(2)} s, ${out.stats.tokensPerSecond.toFixed(0)} tokens/s`,
  )
}
result.decode = decode
result.peakRssMiB = process.resourceUsage().maxRSS / 1024
say(`peak RSS ${(result.peakRssMiB as number).toFixed(0)} MiB`)
result.measuredAt = new Date().toISOString()
const existing = existsSync(OUT) ? (JSON.parse(await readFile(OUT, 'utf8')) as Record<string, unknown>) : {}
await writeFile(OUT, `${JSON.stringify({ ...existing, ...result }, null, 2)}\n`)
await engine.close()
say(`wrote ${OUT}`)
