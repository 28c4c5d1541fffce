// The decode step: sequences join and leave a running batch between steps, each row at its own position, and a
// sequence's tokens do not depend on its neighbours, on its row, or on when it joined.
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { createLocalEngine } from '../../engine/index.ts'
import { mulberry32 } from '../../envs/rng.ts'
import { DecodeBatch, type SampledToken, type SequenceSpec, topK } from '../../policy/decode-batch.ts'
import { generate } from '../../policy/generate.ts'
import { initWeights } from '../../policy/init.ts'
import { policyModel } from '../../policy/trainer.ts'
import { SMALL } from './small-config.ts'
import { staggered } from './staggered-decode.ts'

const PROMPTS = [[5, 9, 11, 3, 7, 2, 8], [4, 4], [17, 30, 1, 9], [12]]

function logSoftmax(row: Float64Array): Float64Array {
  const max = Math.max(...row)
  const lse = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0))
  return row.map((x) => x - lse)
}

describe('decode batch', () => {
  const engine = createLocalEngine({ threads: 1 })
  after(() => engine.close())
  const model = policyModel(engine, SMALL, initWeights(SMALL, mulberry32(5), 0.3))
  const spec = (i: number, over: Partial<SequenceSpec> = {}): SequenceSpec => ({
    prompt: PROMPTS[i] as number[],
    temperature: 0.8,
    rng: mulberry32(200 + i),
    ...over,
  })

  it('gives a sequence the same tokens alone, or joining a running batch later in another row', async () => {
    const alone = await Promise.all(
      PROMPTS.map(async (_, i) => {
        const batch = new DecodeBatch(model, { rows: 1, capacity: 24, compact: true })
        return (await staggered(batch, [spec(i)], [0], 10)).tokens[0]?.map((t) => t.token)
      }),
    )
    const batch = new DecodeBatch(model, { rows: 3, capacity: 40, compact: true })
    const together = await staggered(
      batch,
      PROMPTS.map((_, i) => spec(i)),
      [0, 0, 3, 10],
      10,
    )
    assert.deepEqual(
      together.tokens.map((ts) => ts.map((t) => t.token)),
      alone,
    )
    assert.equal(together.rows[3], 0, 'the fourth sequence reuses the first free row')
  })

  it('matches a full forward pass at every step while rows sit at different positions', async () => {
    const batch = new DecodeBatch(model, { rows: 4, capacity: 32, sampling: 'logprobs', compact: true })
    const { tokens } = await staggered(
      batch,
      PROMPTS.map((_, i) => spec(i, { temperature: 1, topLogprobs: SMALL.vocabSize })),
      [0, 2, 2, 6],
      8,
    )
    const full = await model.logits(PROMPTS.map((p, i) => [...p, ...(tokens[i] as SampledToken[]).map((t) => t.token)]))
    let worst = 0
    PROMPTS.forEach((prompt, i) => {
      ;(tokens[i] as SampledToken[]).forEach((t, s) => {
        const at = prompt.length - 1 + s
        const reference = logSoftmax(
          (full[i] as Float64Array).subarray(at * SMALL.vocabSize, (at + 1) * SMALL.vocabSize),
        )
        for (const { token, logprob } of t.top ?? [])
          worst = Math.max(worst, Math.abs((reference[token] as number) - logprob))
        assert.ok(Math.abs((reference[t.token] as number) - t.logprob) < 1e-4)
      })
    })
    assert.ok(worst <= 1e-4, `max |decode batch − full forward| log-prob difference ${worst}`)
  })

  it('decodes each row at its own temperature, greedy rows beside sampled ones, as generate() does alone', async () => {
    const settings = [
      { temperature: 0.5, greedy: true },
      { temperature: 1.3 },
      { temperature: 0.7, topP: 0.9 },
      { temperature: 1 },
    ]
    const batch = new DecodeBatch(model, { rows: 4, capacity: 30 })
    const { tokens } = await staggered(
      batch,
      settings.map((s, i) => spec(i, s)),
      [0, 0, 0, 0],
      9,
    )
    for (const [i, s] of settings.entries()) {
      const { sequences } = await generate(model, [PROMPTS[i] as number[]], {
        maxNewTokens: 9,
        eosIds: [],
        rngs: [mulberry32(200 + i)],
        ...s,
      })
      assert.deepEqual(
        tokens[i]?.map((t) => t.token),
        sequences[0]?.tokens,
        `sequence ${i} (${JSON.stringify(s)})`,
      )
    }
  })

  it('counts steps and the rows each one sampled for', async () => {
    const batch = new DecodeBatch(model, { rows: 4, capacity: 20, compact: true })
    await staggered(batch, [spec(0), spec(1), spec(2)], [0, 0, 2], 4)
    // steps 0-2 sample the first two (3 tokens after the prefill's); the third joins at 2 and steps 2-4
    assert.deepEqual(batch.stats, { prefills: 2, prefillTokens: 13, steps: 5, stepRows: 9 })
  })

  it('refuses more sequences than free rows, a full row, and top-p on the in-graph sampler, naming the limits', async () => {
    const batch = new DecodeBatch(model, { rows: 1, capacity: 8, sampling: 'in-graph' })
    await assert.rejects(batch.admit([spec(1), spec(2)]), /2 sequences to admit, 1 of 1 rows free/)
    await assert.rejects(batch.admit([spec(1, { topP: 0.5 })]), /top-p 0.5 needs 'logprobs'/)
    await assert.rejects(
      batch.admit([spec(3, { prompt: Array(9).fill(1) })]),
      /prompt of 9 tokens exceeds the cache capacity of 8/,
    )
    const [first] = await batch.admit([spec(0)]) // 7 prompt tokens: one step fits
    assert.equal(batch.room(first?.row as number), 2)
    await batch.step()
    await assert.rejects(batch.step(), /row 0 is full: 8 cache slots used \(prompt 7\)/)
    assert.throws(() => new DecodeBatch(model, { rows: 1, capacity: 65 }), /capacity 65 is outside 1..64/)
  })

  it('finds the k most likely tokens, ties to the lower id', () => {
    const row = Float32Array.from([-3, -1, -2, -1, -5])
    assert.deepEqual(topK(row, 3), [
      { token: 1, logprob: -1 },
      { token: 3, logprob: -1 },
      { token: 2, logprob: -2 },
    ])
  })
})
