// One process's results of a fixed computation, for ort-library.test.ts to hold the PyPI wheel's ORT library to
// onnxruntime-node's own, and test/engine/native-parity.test.ts the native engine to the local one: three train steps
// (the optimizer in the graph) and sampled decoding (seeded) of the tiny preset at one ORT thread (bit-reproducible),
// then the ORT library this process loaded. SEEDFLOW_CHILD_ENGINE=native=<addon> runs it on the native engine (native-webgpu=<addon>: its
// tensors in WebGPU memory).
// Prints one JSON line.
import { createHash } from 'node:crypto'
import { createLocalEngine, loadedOrtLibrary } from '../../engine/index.ts'
import { createNativeEngine } from '../../engine/native-engine.ts'
import { mulberry32 } from '../../envs/rng.ts'
import { PRESETS } from '../../policy/config.ts'
import { generate } from '../../policy/generate.ts'
import { initWeights } from '../../policy/init.ts'
import { meanNll, meanNllFeeds } from '../../policy/losses.ts'
import { Trainer } from '../../policy/trainer.ts'

const config = { ...PRESETS.tiny, maxPositions: 64 }
const choice = process.env.SEEDFLOW_CHILD_ENGINE ?? 'local'
const [kind, addon = ''] = choice.split('=')
const engine =
  kind === 'native'
    ? createNativeEngine({ threads: 1, addon })
    : kind === 'native-webgpu'
      ? createNativeEngine({ threads: 1, addon, executionProviders: [{ name: 'webgpu' }, 'cpu'], cpuFallback: 'allow' })
      : createLocalEngine({ threads: 1 })
const trainer = new Trainer(engine, config, initWeights(config, mulberry32(1)))
const rng = mulberry32(2)
const items = Array.from({ length: 4 }, () => {
  const ids = Array.from({ length: 33 }, () => Math.floor(rng.next() * config.vocabSize))
  return { context: ids.slice(0, 1), response: ids.slice(1) }
})
const feeds = meanNllFeeds(trainer.model, items)
const train = await trainer.trainModel(meanNll)
const steps = []
for (let i = 0; i < 3; i++) {
  const { loss, gradNorm } = await trainer.step(train, feeds, { lr: 1e-3, maxGradNorm: 1, weightDecay: 0.01 })
  steps.push({ loss, gradNorm })
}
const weights = createHash('sha256')
for (const [name, w] of [...(await trainer.trained())].sort(([a], [b]) => a.localeCompare(b)))
  weights.update(name).update(new Uint8Array(w.buffer, w.byteOffset, w.byteLength))
const prompts = items.map((it) => it.response.slice(0, 8))
const { sequences } = await generate(trainer.model, prompts, {
  maxNewTokens: 16,
  temperature: 1,
  eosIds: [],
  rngs: prompts.map((_, i) => mulberry32(10 + i)),
})
const tokens = sequences.map((s) => s.tokens)
const logprobs = sequences.map((s) => s.logprobs)
process.stdout.write(
  `${JSON.stringify({ ortLibrary: loadedOrtLibrary(), steps, weights: weights.digest('hex'), tokens, logprobs })}\n`,
)
await engine.close()
