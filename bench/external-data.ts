// A LoRA trainer over a base too large for one protobuf (issue 42 item 3): a synthetic Llama of 2.4 GB float32,
// random weights, its base baked into the train session through an ONNX external data file
// (engine/model-files.ts); one step of LoRA r 8 on q_proj and v_proj, and the same model's loss from a train graph
// fed every weight (no data file), side by side. Not in CI (about 10 GiB of memory, minutes on 2 cores).
// Usage: node --import tsx bench/external-data.ts   → bench/results/external-data.json
import { writeFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { createLocalEngine, encodeModel, type Feeds, tensor } from '../engine/index.ts'
import { mulberry32 } from '../envs/rng.ts'
import type { ModelConfig } from '../policy/config.ts'
import { initWeights } from '../policy/init.ts'
import { initLora, type LoraConfig } from '../policy/lora.ts'
import { meanNll } from '../policy/losses.ts'
import { buildTrainGraph, IO } from '../policy/model.ts'
import { parameterCount, parameterSpecs } from '../policy/parameters.ts'
import { ropeTables } from '../policy/rope.ts'
import { Trainer } from '../policy/trainer.ts'

const CONFIG: ModelConfig = {
  family: 'llama',
  vocabSize: 32000,
  hiddenSize: 2048,
  intermediateSize: 5632,
  numLayers: 12,
  numHeads: 16,
  numKvHeads: 4,
  headDim: 128,
  rmsNormEps: 1e-5,
  ropeTheta: 10000,
  maxPositions: 256,
  qkvBias: false,
  tieEmbeddings: true,
}
const LORA: LoraConfig = { rank: 8, alpha: 16, dropout: 0, targets: ['q_proj', 'v_proj'] }
const THREADS = 2

const gib = (bytes: number) => bytes / 2 ** 30
const say = (line: string) => console.log(`external-data: ${line}`)
const rss = () => gib(process.memoryUsage().rss)
let peak = 0
const sample = setInterval(() => {
  peak = Math.max(peak, rss())
}, 200)

async function timed<T>(what: string, body: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now()
  const value = await body()
  const seconds = (performance.now() - started) / 1000
  say(`${what}: ${seconds.toFixed(1)} s, rss ${rss().toFixed(2)} GiB`)
  return [value, seconds]
}

const engine = createLocalEngine({ threads: THREADS })
const parameters = parameterCount(CONFIG)
say(`${(parameters / 1e6).toFixed(0)}M parameters, ${gib(parameters * 4).toFixed(2)} GiB float32`)
const [base, initSeconds] = await timed('random weights', async () => initWeights(CONFIG, mulberry32(1)))
const adapters = initLora(CONFIG, LORA, mulberry32(2))
// a non-zero B, so that the adapters change the loss
const bRng = mulberry32(3)
for (const [name, t] of adapters)
  if (name.includes('lora_B')) for (let i = 0; i < t.length; i++) t[i] = (bRng.next() - 0.5) * 0.02
const trainer = new Trainer(engine, CONFIG, base, { lora: { config: LORA, adapters } })
const rng = mulberry32(4)
const items = [0, 1].map(() => {
  const seq = Array.from({ length: 32 }, () => Math.floor(rng.next() * CONFIG.vocabSize))
  return { context: seq.slice(0, 8), response: seq.slice(8) }
})
const tb = trainer.model.tokenBatch(items, 1)
const batch: Feeds = { ...tb.feeds, mask: trainer.model.float([tb.B, tb.T], tb.responseMask) }

const [train, loadSeconds] = await timed('train session (base in a data file beside the model)', () =>
  trainer.trainModel(meanNll),
)
const [step, stepSeconds] = await timed('one LoRA step', () => trainer.step(train, batch, { lr: 1e-3 }))
await trainer.release()

// the same model fed every weight: a train graph without initializers (its feeds have no size limit)
const [fed, fedSeconds] = await timed('the same step fed every weight (loss and gradients)', async () => {
  const model = await engine.load(encodeModel(buildTrainGraph(CONFIG, meanNll, 'float32', { lora: LORA })))
  const { cos, sin } = ropeTables(CONFIG, CONFIG.maxPositions)
  const feeds: Feeds = {
    ...batch,
    [IO.ropeCos]: tensor('float32', [CONFIG.maxPositions, CONFIG.headDim], cos),
    [IO.ropeSin]: tensor('float32', [CONFIG.maxPositions, CONFIG.headDim], sin),
  }
  for (const s of parameterSpecs(CONFIG)) feeds[s.name] = tensor('float32', s.shape, base.get(s.name) as Float32Array)
  for (const [name, t] of adapters) {
    const spec = trainer.trainedSpecs().find((s) => s.name === name)
    feeds[name] = tensor('float32', spec?.shape ?? [t.length], t)
  }
  const out = await engine.run(model, feeds, { fetches: [IO.loss] })
  await engine.release(model)
  return Number(out[IO.loss]?.data[0])
})
clearInterval(sample)
await engine.close()

const result = {
  date: new Date().toISOString().slice(0, 10),
  command: 'node --import tsx bench/external-data.ts',
  threads: THREADS,
  loadAverage: loadavg().map((l) => Number(l.toFixed(2))),
  model: { ...CONFIG, parameters, float32GiB: Number(gib(parameters * 4).toFixed(3)) },
  lora: LORA,
  batch: { B: tb.B, T: tb.T },
  seconds: {
    randomWeights: Number(initSeconds.toFixed(1)),
    trainSession: Number(loadSeconds.toFixed(1)),
    step: Number(stepSeconds.toFixed(1)),
    fedStep: Number(fedSeconds.toFixed(1)),
  },
  loss: { externalData: step.loss, fed, absoluteDifference: Math.abs(step.loss - fed) },
  gradNorm: step.gradNorm,
  peakRssGiB: Number(peak.toFixed(2)),
}
writeFileSync('bench/results/external-data.json', `${JSON.stringify(result, null, 2)}\n`)
say(`loss ${step.loss} with the base in a data file, ${fed} fed; |Δ| ${result.loss.absoluteDifference}`)
say(`peak rss ${result.peakRssGiB} GiB; wrote bench/results/external-data.json`)
