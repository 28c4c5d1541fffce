// The fused decode graph (policy/decode-graph.ts, ORT's GroupQueryAttention with the cache updated in place)
// against the plain one (model.ts's buildDecodeGraph): same tokens and log-probs, on grouped-query models with
// and without biases, prompts of different lengths, rows joining and leaving a running batch, and through the
// worker engine, whose runs move the cache buffers to the worker and back.
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { createLocalEngine, createWorkerEngine, type Engine } from '../../engine/index.ts'
import { mulberry32 } from '../../envs/rng.ts'
import type { ModelConfig } from '../../policy/config.ts'
import { DecodeBatch, type SampledToken, type SequenceSpec } from '../../policy/decode-batch.ts'
import { fusedDecodeUnsupported } from '../../policy/decode-graph.ts'
import { generate } from '../../policy/generate.ts'
import { initWeights } from '../../policy/init.ts'
import { PolicyModel } from '../../policy/policy-model.ts'
import { SMALL } from './small-config.ts'
import { staggered } from './staggered-decode.ts'

/** GroupQueryAttention's rotary wants a head size divisible by 16; 4 query heads share 2 KV heads. */
const LLAMA: ModelConfig = { ...SMALL, hiddenSize: 64, headDim: 16, numLayers: 2 }
const QWEN2: ModelConfig = { ...LLAMA, family: 'qwen2', qkvBias: true, tieEmbeddings: false }
const PROMPTS = [[5, 9, 11, 3, 7, 2, 8], [4, 4], [17, 30, 1, 9], [12], [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]]

function worstGap(a: SampledToken[][], b: SampledToken[][]): number {
  let worst = 0
  a.forEach((ts, i) => {
    ts.forEach((t, s) => {
      worst = Math.max(worst, Math.abs(t.logprob - (b[i]?.[s]?.logprob ?? Number.NaN)))
    })
  })
  return worst
}

const tokensOf = (ts: SampledToken[][]) => ts.map((s) => s.map((t) => t.token))

describe('fused decode graph', () => {
  const engine = createLocalEngine({ threads: 1 })
  after(() => engine.close())

  for (const [family, config] of [
    ['llama', LLAMA],
    ['qwen2 (q/k/v biases)', QWEN2],
  ] as const) {
    const model = new PolicyModel(engine, config, initWeights(config, mulberry32(7), 0.3))
    const spec = (i: number, over: Partial<SequenceSpec> = {}): SequenceSpec => ({
      prompt: PROMPTS[i] as number[],
      temperature: 0.8,
      rng: mulberry32(300 + i),
      ...over,
    })

    it(`${family}: greedy tokens equal the plain graph's over 40 steps, prompts of different lengths`, async () => {
      const run = (graph: 'fused' | 'plain') =>
        generate(
          model,
          PROMPTS.map((p) => p),
          { maxNewTokens: 40, temperature: 1, greedy: true, eosIds: [], rngs: PROMPTS.map(() => mulberry32(1)), graph },
        )
      const fused = await run('fused')
      const plain = await run('plain')
      assert.deepEqual(
        fused.sequences.map((s) => s.tokens),
        plain.sequences.map((s) => s.tokens),
      )
      let worst = 0
      fused.sequences.forEach((s, i) => {
        s.logprobs.forEach((lp, t) => {
          worst = Math.max(worst, Math.abs(lp - (plain.sequences[i]?.logprobs[t] as number)))
        })
      })
      assert.ok(worst <= 1e-4, `greedy log-prob gap ${worst}`)
    })

    it(`${family}: sampled tokens and log-probs equal the plain graph's with rows joining and leaving`, async () => {
      const run = async (graph: 'fused' | 'plain') => {
        const batch = new DecodeBatch(model, { rows: 4, capacity: 48, compact: true, graph })
        assert.equal(batch.graph, graph)
        const specs = PROMPTS.map((_, i) => spec(i, i === 1 ? { greedy: true, temperature: 0.6 } : {}))
        // the fifth joins row 0 or 1 once its first two sequences have ended
        return (await staggered(batch, specs, [0, 0, 2, 5, 34], 32)).tokens
      }
      const fused = await run('fused')
      const plain = await run('plain')
      assert.deepEqual(tokensOf(fused), tokensOf(plain))
      const worst = worstGap(fused, plain)
      assert.ok(worst <= 1e-4, `sampled log-prob gap ${worst}`)
    })

    it(`${family}: the (B, V) log-prob rows (top-p, top log-probs) equal the plain graph's`, async () => {
      const run = async (graph: 'fused' | 'plain') => {
        const batch = new DecodeBatch(model, { rows: 4, capacity: 40, graph })
        const specs = [0, 2, 4].map((i) => spec(i, { topP: 0.9, topLogprobs: 5 }))
        return (await staggered(batch, specs, [0, 0, 3], 12)).tokens
      }
      const fused = await run('fused')
      const plain = await run('plain')
      assert.deepEqual(tokensOf(fused), tokensOf(plain))
      let worst = worstGap(fused, plain)
      fused.forEach((ts, i) => {
        ts.forEach((t, s) => {
          const ref = plain[i]?.[s]?.top ?? []
          assert.deepEqual(
            t.top?.map((c) => c.token),
            ref.map((c) => c.token),
          )
          t.top?.forEach((c, k) => {
            worst = Math.max(worst, Math.abs(c.logprob - (ref[k]?.logprob as number)))
          })
        })
      })
      assert.ok(worst <= 1e-4, `log-prob row gap ${worst}`)
    })
  }

  it('runs where asked (auto: where the model allows it), else the plain graph with the reason', () => {
    const fusedModel = new PolicyModel(engine, LLAMA, initWeights(LLAMA, mulberry32(7), 0.3))
    assert.equal(new DecodeBatch(fusedModel, { rows: 1, capacity: 8 }).graph, 'plain')
    assert.equal(new DecodeBatch(fusedModel, { rows: 1, capacity: 8 }).plainReason, 'asked for')
    assert.equal(new DecodeBatch(fusedModel, { rows: 1, capacity: 8, graph: 'auto' }).graph, 'fused')
    const small = new PolicyModel(engine, SMALL, initWeights(SMALL, mulberry32(7), 0.3))
    const fallback = new DecodeBatch(small, { rows: 1, capacity: 8, graph: 'auto' })
    assert.equal(fallback.graph, 'plain')
    assert.match(fallback.plainReason ?? '', /head size divisible by 16, got 8/)
    assert.throws(() => new DecodeBatch(small, { rows: 1, capacity: 8, graph: 'fused' }), /divisible by 16/)
    assert.match(fusedDecodeUnsupported(LLAMA, 'float64') ?? '', /no float64 CPU kernel/)
  })

  it('frozen weights (baked into the sessions) decode as fed weights do, and follow in-place updates', async () => {
    const weights = initWeights(QWEN2, mulberry32(11), 0.3)
    const model = new PolicyModel(engine, QWEN2, weights)
    const run = (graph: 'fused' | 'plain', frozen: boolean) =>
      generate(model, [PROMPTS[0] as number[], PROMPTS[4] as number[]], {
        maxNewTokens: 24,
        temperature: 0.9,
        eosIds: [],
        rngs: [mulberry32(1), mulberry32(2)],
        graph,
        weights: frozen ? 'frozen' : 'inputs',
      })
    const gap = (a: Awaited<ReturnType<typeof run>>, b: Awaited<ReturnType<typeof run>>) => {
      assert.deepEqual(
        a.sequences.map((s) => s.tokens),
        b.sequences.map((s) => s.tokens),
      )
      return Math.max(
        ...a.sequences.flatMap((s, i) =>
          s.logprobs.map((lp, t) => Math.abs(lp - (b.sequences[i]?.logprobs[t] as number))),
        ),
      )
    }
    const fed = await run('plain', false)
    assert.ok(gap(await run('plain', true), fed) <= 1e-5)
    assert.ok(gap(await run('fused', true), fed) <= 1e-4)
    // an optimizer step changes the weights in place: the frozen sessions must be rebuilt, not reused
    for (const w of weights.values()) for (let i = 0; i < w.length; i++) w[i] = (w[i] as number) * 1.3
    const fedAfter = await run('plain', false)
    assert.notDeepEqual(
      fedAfter.sequences.map((s) => s.logprobs),
      fed.sequences.map((s) => s.logprobs),
    )
    assert.ok(gap(await run('plain', true), fedAfter) <= 1e-5)
    assert.ok(gap(await run('fused', true), fedAfter) <= 1e-4)
  })

  it('gives the same tokens through the worker engine, before and after the weights change in place', async () => {
    // plain: caches lent to the worker and back; fused: caches moved as outputs; both: weights kept in the
    // worker, kept again once an update changes them in place
    const worker: Engine = createWorkerEngine({ threads: 1 })
    try {
      for (const graph of ['plain', 'fused'] as const) {
        const weights = initWeights(LLAMA, mulberry32(7), 0.3)
        const local = new PolicyModel(engine, LLAMA, weights)
        const remote = new PolicyModel(worker, LLAMA, weights)
        const decode = async (model: PolicyModel) => {
          const batch = new DecodeBatch(model, { rows: 2, capacity: 32, compact: true, graph })
          const { tokens } = await staggered(
            batch,
            [0, 1, 3].map((i) => ({ prompt: PROMPTS[i] as number[], temperature: 0.9, rng: mulberry32(50 + i) })),
            [0, 1, 18],
            16,
          )
          return tokens
        }
        const before = await decode(local)
        assert.deepEqual(tokensOf(await decode(remote)), tokensOf(before), graph)
        assert.ok(worstGap(await decode(remote), before) <= 1e-6, graph)
        for (const w of weights.values()) for (let i = 0; i < w.length; i++) w[i] = (w[i] as number) * 1.3
        const after = await decode(local)
        assert.notDeepEqual(tokensOf(after), tokensOf(before), `${graph}: the change shows`)
        assert.deepEqual(tokensOf(await decode(remote)), tokensOf(after), `${graph}: after the change`)
        assert.ok(worstGap(await decode(remote), after) <= 1e-6, graph)
        await remote.release()
      }
    } finally {
      await worker.close()
    }
  })
})
