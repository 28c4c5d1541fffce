// End to end through the train graph, AdamW, checkpoint save/load and the standalone ONNX export: a small
// model memorizes a fixed corpus.
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { createLocalEngine, type Value } from '../../engine/index.ts'
import { mulberry32 } from '../../envs/rng.ts'
import { trainByteLevelBpe } from '../../policy/bpe-trainer.ts'
import {
  decodeCheckpoint,
  decodeOptimizerState,
  encodeCheckpoint,
  encodeOptimizerState,
} from '../../policy/checkpoint.ts'
import { type ModelConfig, PRESETS } from '../../policy/config.ts'
import { exportStandaloneOnnx } from '../../policy/export.ts'
import { generate } from '../../policy/generate.ts'
import { initWeights } from '../../policy/init.ts'
import { IO, type LossBuilder } from '../../policy/model.ts'
import { TextTokenizer, TINY_SPECIAL_TOKENS } from '../../policy/tokenizer.ts'
import { policyModel, Trainer } from '../../policy/trainer.ts'

const CORPUS = [
  'Push the box right, then up.',
  'Clean the mug in the sinkbasin.',
  'Eight plus four makes twelve.',
  'Search for the capital of France.',
  'Buy a red cotton shirt under 30 dollars.',
  'Open the fridge and take the apple.',
]

describe('memorizing a small corpus', () => {
  const engine = createLocalEngine({ threads: 2 })
  after(() => engine.close())

  it('reaches < 0.05 nats/token, survives a checkpoint round trip, and the exported ONNX model gives identical logits', async (t) => {
    const tokenizer = new TextTokenizer(
      trainByteLevelBpe(CORPUS, { vocabSize: 320, specialTokens: [...TINY_SPECIAL_TOKENS] }),
    )
    const config: ModelConfig = {
      ...PRESETS.tiny,
      vocabSize: tokenizer.vocabSize,
      hiddenSize: 64,
      intermediateSize: 128,
      numLayers: 2,
      numHeads: 4,
      numKvHeads: 2,
      headDim: 16,
      maxPositions: 64,
    }
    const trainer = new Trainer(engine, config, initWeights(config, mulberry32(1)))
    const model = trainer.model
    const bos = tokenizer.tokenId('<|im_start|>') as number
    const eos = tokenizer.eosIds[0] as number
    // a distinct context per sentence (its number), so that every next token is determined and memorizable
    const items = CORPUS.map((text, i) => ({
      context: [bos, ...tokenizer.encode(`${i}:`)],
      response: [...tokenizer.encode(text), eos],
    }))
    const nll: LossBuilder = (op, s: { logp: Value }) => {
      const mask = op.input('mask', 'float32', ['B', 'T'])
      const loss = op.Div(
        op.Neg(op.ReduceSum(op.Mul(s.logp, mask), undefined, { keepdims: 0 })),
        op.ReduceSum(mask, undefined, { keepdims: 0 }),
      )
      return { loss }
    }
    const train = await trainer.trainModel(nll)
    const batch = model.tokenBatch(items, 1)
    const feeds = () => ({
      ...model.tokenBatch(items, 1).feeds,
      mask: model.float([batch.B, batch.T], batch.responseMask),
    })
    let loss = Number.POSITIVE_INFINITY
    let steps = 0
    while (loss >= 0.05 && steps < 400) {
      loss = (await trainer.step(train, feeds(), { lr: 3e-3, weightDecay: 0 })).loss
      steps++
    }
    t.diagnostic(`loss ${loss.toFixed(4)} nats/token after ${steps} AdamW steps`)
    assert.ok(loss < 0.05, `loss ${loss} after ${steps} steps`)

    // greedy decoding from each context reproduces its sentence verbatim (through the KV-cache decoder)
    const rngs = items.map((_, i) => mulberry32(i))
    const out = await generate(
      model,
      items.map((it) => it.context),
      { maxNewTokens: 40, temperature: 1, greedy: true, eosIds: [eos], rngs },
    )
    assert.deepEqual(
      out.sequences.map((s) => tokenizer.decode(s.tokens, { skipSpecial: true })),
      CORPUS,
    )

    // checkpoint (weights + optimizer) round trip: same loss from the reloaded model
    const files = encodeCheckpoint({ config, weights: await trainer.trained(), eosIds: [eos], tokenizerJson: {} })
    const reloaded = decodeCheckpoint(files)
    const opt = decodeOptimizerState(encodeOptimizerState(await trainer.optimizerState()))
    assert.equal(opt.step, steps)
    const again = policyModel(engine, reloaded.config, reloaded.weights)
    const check = await engine.run(await again.gradientModel(nll), feeds(), { kept: await again.parameters.kept() })
    const lossBefore = Number(
      (await engine.run(await model.gradientModel(nll), feeds(), { kept: await model.parameters.kept() }))[IO.loss]
        ?.data[0],
    )
    assert.ok(Math.abs(Number(check[IO.loss]?.data[0]) - lossBefore) <= 1e-6, 'reloaded loss differs')

    // standalone ONNX (weights inside) in a fresh session: identical logits
    const fresh = createLocalEngine({ threads: 1 })
    try {
      const standalone = await fresh.load(await exportStandaloneOnnx(trainer, 'forward'))
      const sequence = [...(items[0]?.context ?? []), ...(items[0]?.response ?? [])]
      const {
        [IO.targets]: _t,
        [IO.invTemperature]: _i,
        ...dynamic
      } = model.tokenBatch([{ context: sequence, response: [] }], 1).feeds
      const onlyInputs = Object.fromEntries(
        Object.entries(dynamic).filter(([k]) => [IO.ids, IO.positions, IO.valid].includes(k as never)),
      )
      const exported = (await fresh.run(standalone, onlyInputs))[IO.logits]?.data as Float32Array
      const ours = (await model.logits([sequence]))[0] as Float64Array
      let worst = 0
      for (let i = 0; i < ours.length; i++)
        worst = Math.max(worst, Math.abs((ours[i] as number) - (exported[i] as number)))
      assert.ok(worst <= 1e-6, `exported logits differ by ${worst}`)
    } finally {
      await fresh.close()
    }
  })
})
