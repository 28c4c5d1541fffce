import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { createLocalEngine, type Value } from '../../engine/index.ts'
import { mulberry32 } from '../../envs/rng.ts'
import { generate } from '../../policy/generate.ts'
import { initWeights } from '../../policy/init.ts'
import { IO } from '../../policy/model.ts'
import { policyModel } from '../../policy/trainer.ts'
import { SMALL } from './small-config.ts'

const PROMPTS = [
  [5, 9, 11, 3, 7, 2, 8],
  [4, 4],
  [17, 30, 1, 9],
] // ragged

function logSoftmax(row: Float64Array): Float64Array {
  const max = Math.max(...row)
  const lse = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0))
  return row.map((x) => x - lse)
}

describe('policy model graphs', () => {
  const engine = createLocalEngine({ threads: 1 })
  after(() => engine.close())
  const weights = initWeights(SMALL, mulberry32(5), 0.3) // large init: peaked, position-sensitive distributions

  for (const [what, config] of [
    ['', SMALL],
    [', learned positions', { ...SMALL, learnedPositions: true }],
  ] as const) {
    it(`decodes with the KV cache exactly as a full forward pass over the same tokens (ragged prompts${what})`, async (t) => {
      const model = policyModel(engine, config, config === SMALL ? weights : initWeights(config, mulberry32(5), 0.3))
      const rngs = PROMPTS.map((_, i) => mulberry32(100 + i))
      // record the decode graph's distribution at every step by sampling with temperature 1
      const steps: Float64Array[][] = PROMPTS.map(() => [])
      const handles = [await model.decodeSession('logprobs', true), await model.decodeSession('logprobs', false)] // prefill, steps
      const run = engine.run.bind(engine)
      engine.run = async (h, feeds, options) => {
        const out = await run(h, feeds, options)
        if (handles.includes(h)) {
          const lp = out[IO.logprobs]?.data as Float32Array
          for (let b = 0; b < PROMPTS.length; b++) {
            steps[b]?.push(Float64Array.from(lp.subarray(b * SMALL.vocabSize, (b + 1) * SMALL.vocabSize)))
          }
        }
        return out
      }
      const result = await generate(model, PROMPTS, {
        maxNewTokens: 12,
        temperature: 1,
        eosIds: [],
        rngs,
        sampling: 'logprobs',
      })
      engine.run = run
      const full = await model.logits(PROMPTS.map((p, b) => [...p, ...(result.sequences[b]?.tokens ?? [])]))
      let worst = 0
      PROMPTS.forEach((prompt, b) => {
        const seq = result.sequences[b]
        assert.equal(seq?.tokens.length, 12)
        for (let s = 0; s < 12; s++) {
          const position = prompt.length - 1 + s
          const reference = logSoftmax(
            (full[b] as Float64Array).subarray(position * SMALL.vocabSize, (position + 1) * SMALL.vocabSize),
          )
          const cached = steps[b]?.[s] as Float64Array
          for (let v = 0; v < SMALL.vocabSize; v++)
            worst = Math.max(worst, Math.abs((reference[v] as number) - (cached[v] as number)))
        }
      })
      t.diagnostic(`max |KV-cache − full forward| log-prob difference ${worst.toExponential(2)}`)
      assert.ok(worst <= 1e-4, `max |KV-cache − full forward| log-prob difference ${worst}`)
    })
  }

  it('gives the same token log-probs in the sampler, the score graph and the train graph (PPO ratio exactly 1)', async (t) => {
    const model = policyModel(engine, SMALL, weights)
    const temperature = 0.7
    const rngs = PROMPTS.map((_, i) => mulberry32(7 + i))
    const { sequences } = await generate(model, PROMPTS, { maxNewTokens: 10, temperature, topP: 0.9, eosIds: [], rngs })
    const items = PROMPTS.map((context, b) => ({ context, response: sequences[b]?.tokens ?? [] }))
    const scored = await model.score(items, temperature)
    const train = await model.gradientModel((op, scores) => {
      const mask = op.input('mask', 'float32', ['B', 'T'])
      return { loss: op.Neg(op.ReduceSum(op.Mul(scores.logp, mask), undefined, { keepdims: 0 })) as Value }
    })
    const batch = model.tokenBatch(items, temperature)
    const out = await engine.run(
      train,
      { ...batch.feeds, mask: model.float([batch.B, batch.T], batch.responseMask) },
      { kept: await model.parameters.kept() },
    )
    const trainLogp = out[IO.tokenLogprobs]?.data as Float32Array
    let worst = 0
    items.forEach((item, b) => {
      item.response.forEach((_, i) => {
        const sampled = sequences[b]?.logprobs[i] as number
        const score = scored[b]?.logprobs[i] as number
        const trained = trainLogp[b * batch.T + (batch.offsets[b] as number) + i] as number
        worst = Math.max(worst, Math.abs(sampled - score), Math.abs(sampled - trained))
      })
    })
    t.diagnostic(`max log-prob disagreement sampler/score/train ${worst.toExponential(2)}`)
    assert.ok(worst <= 1e-5, `max log-prob disagreement ${worst}`)
  })

  it('samples reproducibly: the same seeds give the same tokens', async () => {
    const model = policyModel(engine, SMALL, weights)
    const draw = async () =>
      (
        await generate(model, PROMPTS, {
          maxNewTokens: 8,
          temperature: 1,
          eosIds: [],
          rngs: PROMPTS.map((_, i) => mulberry32(i)),
        })
      ).sequences.map((s) => s.tokens)
    assert.deepEqual(await draw(), await draw())
  })

  it('draws the same tokens in the graph as from returned log-probs (one uniform per step, vocabulary order)', async () => {
    const model = policyModel(engine, SMALL, weights)
    const draw = async (sampling: 'in-graph' | 'logprobs', greedy = false) =>
      (
        await generate(model, PROMPTS, {
          maxNewTokens: 16,
          temperature: 0.9,
          eosIds: [],
          greedy,
          sampling,
          rngs: PROMPTS.map((_, i) => mulberry32(50 + i)),
        })
      ).sequences
    for (const greedy of [false, true]) {
      const inGraph = await draw('in-graph', greedy)
      const fromLogprobs = await draw('logprobs', greedy)
      assert.deepEqual(
        inGraph.map((s) => s.tokens),
        fromLogprobs.map((s) => s.tokens),
      )
      for (const [b, s] of inGraph.entries()) {
        for (const [i, lp] of s.logprobs.entries())
          assert.ok(Math.abs(lp - (fromLogprobs[b]?.logprobs[i] as number)) <= 1e-6)
      }
    }
  })

  it('stops at an end-of-sequence token and at a stop string', async () => {
    const model = policyModel(engine, SMALL, weights)
    const rngs = PROMPTS.map((_, i) => mulberry32(i))
    const free = await generate(model, PROMPTS, { maxNewTokens: 8, temperature: 1, eosIds: [], rngs })
    const first = free.sequences[0]?.tokens[2] as number
    const eos = await generate(model, PROMPTS, {
      maxNewTokens: 8,
      temperature: 1,
      eosIds: [first],
      rngs: PROMPTS.map((_, i) => mulberry32(i)),
    })
    assert.equal(eos.sequences[0]?.finish, 'eos')
    assert.ok((eos.sequences[0]?.tokens.length as number) <= 3)
    const decode = (ids: readonly number[]) => ids.map((id) => String.fromCharCode(97 + (id % 26))).join('')
    const stopText = decode(free.sequences[1]?.tokens.slice(0, 2) ?? [])
    const stop = await generate(model, PROMPTS, {
      maxNewTokens: 8,
      temperature: 1,
      eosIds: [],
      stop: [stopText],
      decode,
      rngs: PROMPTS.map((_, i) => mulberry32(i)),
    })
    assert.equal(stop.sequences[1]?.finish, 'stop')
    assert.equal(stop.sequences[1]?.tokens.length, 2)
  })
})

describe('policy model graph lifetime', () => {
  it('releases every graph it loaded (cached and train graphs) and loads them again on demand', async () => {
    const engine = createLocalEngine({ threads: 1 })
    const live = new Set<number>()
    const counting = {
      ...engine,
      load: async (bytes: Uint8Array) => {
        const h = await engine.load(bytes)
        live.add(h as unknown as number)
        return h
      },
      release: async (h: Parameters<typeof engine.release>[0]) => {
        live.delete(h as unknown as number)
        await engine.release(h)
      },
    }
    try {
      const model = policyModel(counting, SMALL, initWeights(SMALL, mulberry32(5)))
      await model.decodeSession('logprobs', true)
      await model.decodeSession('logprobs', false)
      await model.scoreModel()
      await model.gradientModel((op, scores) => ({ loss: op.ReduceSum(scores.logp, undefined, { keepdims: 0 }) }))
      assert.equal(live.size, 4)
      await model.release()
      assert.equal(live.size, 0)
      const scored = await model.score([{ context: [1, 2, 3], response: [4] }])
      assert.equal(scored.length, 1)
      assert.equal(live.size, 1)
      await model.release()
      assert.equal(live.size, 0)
    } finally {
      await engine.close()
    }
  })
})
