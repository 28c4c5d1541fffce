// The native engine (engine/native-engine.ts: ORT's C API with IoBinding, a Rust addon) beside onnxruntime-node's
// local engine on the CPU, interleaved in one process on the same ORT library: issue 44's CPU target is "no slower
// than onnxruntime-node in the same interleaved run". Units: a full fine-tuning trainer step (weights and AdamW moments
// kept in the engine, the optimizer in the graph) and sampled decoding with a kept KV cache (written by slices).
//   node --import tsx bench/native-engine-ab.ts [--repeats 5] [--threads 2] [--out bench/results/native-engine-ab.json]
import { writeFile } from 'node:fs/promises'
import { parseArgs } from 'node:util'
import { createLocalEngine, type Engine } from '../engine/index.ts'
import { createNativeEngine } from '../engine/native-engine.ts'
import { mulberry32 } from '../envs/rng.ts'
import { ensureNativeAddon } from '../infra/native.ts'
import { PRESETS } from '../policy/config.ts'
import { generate } from '../policy/generate.ts'
import { initWeights } from '../policy/init.ts'
import { meanNll, meanNllFeeds } from '../policy/losses.ts'
import { Trainer } from '../policy/trainer.ts'
import { minMedian } from './min-median.ts'

const { values } = parseArgs({
  options: {
    repeats: { type: 'string', default: '5' },
    threads: { type: 'string', default: '2' },
    out: { type: 'string', default: 'bench/results/native-engine-ab.json' },
  },
})
const repeats = Number(values.repeats)
const threads = Number(values.threads)
const addon = ensureNativeAddon()
const config = { ...PRESETS.bench, maxPositions: 256 }
const B = 8
const T = 128

function batch(seed: number) {
  const rng = mulberry32(seed)
  return Array.from({ length: B }, () => {
    const ids = Array.from({ length: T }, () => Math.floor(rng.next() * config.vocabSize))
    return { context: ids.slice(0, 1), response: ids.slice(1) }
  })
}

/** One engine's units: seconds per trainer step (after a first step that makes the session) and per decode. */
async function units(engine: Engine) {
  const trainer = new Trainer(engine, config, initWeights(config, mulberry32(1)))
  const feeds = meanNllFeeds(trainer.model, batch(2))
  const train = await trainer.trainModel(meanNll)
  const step = { lr: 1e-4, maxGradNorm: 1, weightDecay: 0.01 }
  await trainer.step(train, feeds, step)
  let started = performance.now()
  for (let i = 0; i < 3; i++) await trainer.step(train, feeds, step)
  const trainStep = (performance.now() - started) / 3000
  const prompts = batch(3).map((it) => it.response.slice(0, 32))
  const decode = () =>
    generate(trainer.model, prompts, {
      maxNewTokens: 32,
      temperature: 1,
      eosIds: [],
      rngs: prompts.map((_, i) => mulberry32(10 + i)),
    })
  await decode()
  started = performance.now()
  await decode()
  const decodeRun = (performance.now() - started) / 1000
  return { trainStep, decodeRun }
}

const engines = {
  'onnxruntime-node': () => createLocalEngine({ threads }),
  native: () => createNativeEngine({ threads, addon }),
} as const
const times: Record<string, { trainStep: number[]; decodeRun: number[] }> = {}
for (let r = 0; r < repeats; r++) {
  const order = Object.keys(engines) as (keyof typeof engines)[]
  if (r % 2 === 1) order.reverse()
  for (const name of order) {
    const engine = engines[name]()
    const u = await units(engine)
    await engine.close()
    times[name] ??= { trainStep: [], decodeRun: [] }
    times[name].trainStep.push(u.trainStep)
    times[name].decodeRun.push(u.decodeRun)
    process.stdout.write(
      `repeat ${r + 1}: ${name} train step ${u.trainStep.toFixed(3)} s, decode ${u.decodeRun.toFixed(3)} s\n`,
    )
  }
}
const summary = Object.fromEntries(
  (['trainStep', 'decodeRun'] as const).map((unit) => {
    const ort = minMedian(times['onnxruntime-node']?.[unit] ?? [])
    const native = minMedian(times.native?.[unit] ?? [])
    return [
      unit,
      { onnxruntimeNode: ort, native, ratio: { min: ort.min / native.min, median: ort.median / native.median } },
    ]
  }),
)
const report = {
  date: new Date().toISOString(),
  shape: { preset: 'bench', B, T, decode: '8 × (32 + 32)' },
  threads,
  repeats,
  summary,
}
await writeFile(values.out, `${JSON.stringify(report, null, 2)}\n`)
for (const [unit, s] of Object.entries(summary))
  process.stdout.write(
    `${unit}: onnxruntime-node ÷ native = ${s.ratio.min.toFixed(2)}× (min) / ${s.ratio.median.toFixed(2)}× (median)\n`,
  )
