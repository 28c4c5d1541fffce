// The layouts of the score and train graphs (logits over row chunks, layers recomputed in the backward pass)
// change where values live, not what the graphs compute: every output equals the plain graph's.
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { createLocalEngine, type Fetches } from '../../engine/index.ts'
import { mulberry32 } from '../../envs/rng.ts'
import { initWeights } from '../../policy/init.ts'
import { meanNll } from '../../policy/losses.ts'
import { defaultLogitChunks, type GraphOptions, IO } from '../../policy/model.ts'
import { parameterSpecs } from '../../policy/parameters.ts'
import { policyModel } from '../../policy/trainer.ts'
import { SMALL } from './small-config.ts'

const engine = createLocalEngine({ threads: 1, graphOptimizationLevel: 'basic' })
after(() => engine.close())
const weights = initWeights(SMALL, mulberry32(9), 0.3)
const items = [
  { context: [3, 8, 1], response: [9, 14, 2, 7, 30, 11] },
  { context: [5], response: [6, 6, 40] },
  { context: [7, 7, 7, 7], response: [1] },
]

async function run(options: GraphOptions, few = false): Promise<{ score: Fetches; train: Fetches }> {
  const model = policyModel(engine, SMALL, weights, { dtype: 'float64', graph: options })
  const batch = model.tokenBatch(few ? items.slice(2) : items, 0.7)
  const trained = await model.trainedFeeds()
  const score = await engine.run(await model.scoreModel(), { ...batch.feeds, ...trained })
  const train = await engine.run(await model.gradientModel(meanNll), {
    ...batch.feeds,
    ...trained,
    mask: model.float([batch.B, batch.T], batch.responseMask),
  })
  return { score, train }
}

function maxDiff(a: Fetches, b: Fetches, names: string[]): number {
  let worst = 0
  for (const name of names) {
    const x = a[name]?.data as Float64Array
    const y = b[name]?.data as Float64Array
    assert.equal(x.length, y.length, name)
    x.forEach((v, i) => {
      worst = Math.max(worst, Math.abs(v - (y[i] as number)))
    })
  }
  return worst
}

const gradNames = parameterSpecs(SMALL).map((s) => `${s.name}_grad`)

describe('graph layouts', () => {
  it('logits over row chunks (including chunks left empty) and recomputed layers equal the plain graphs', async () => {
    const plain = await run({ logitChunks: 1 })
    for (const options of [{ logitChunks: 4 }, { logitChunks: 7, recomputeLayers: true }, { recomputeLayers: true }]) {
      const other = await run(options)
      const label = JSON.stringify(options)
      assert.ok(maxDiff(plain.score, other.score, [IO.tokenLogprobs, IO.entropy]) <= 1e-12, `${label} score`)
      assert.ok(maxDiff(plain.train, other.train, [IO.loss, IO.tokenLogprobs]) <= 1e-12, `${label} loss`)
      assert.ok(maxDiff(plain.train, other.train, gradNames) <= 1e-12, `${label} gradients`)
    }
    // 4 tokens in 7 chunks: three chunks are empty
    const few = await run({ logitChunks: 7 }, true)
    const fewPlain = await run({ logitChunks: 1 }, true)
    assert.ok(maxDiff(fewPlain.train, few.train, [IO.loss, ...gradNames]) <= 1e-12)
  })

  it('chunks the logits of large vocabularies only (about 8,192 columns of memory per chunk)', () => {
    assert.equal(defaultLogitChunks(SMALL), 1)
    assert.equal(defaultLogitChunks({ ...SMALL, vocabSize: 49152 }), 6)
    assert.equal(defaultLogitChunks({ ...SMALL, vocabSize: 151936 }), 19)
  })
})
