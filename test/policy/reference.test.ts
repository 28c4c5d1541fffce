// Against an independent implementation: transformers 5.24 / PyTorch 2.15 fixtures written by
// test/fixtures/reference/make_fixtures.py (random-weight tiny Llama and Qwen2, a fixed batch, logits, the mean
// next-token cross-entropy and every parameter's gradient). llama-bias has attention_bias: q, k, v and o_proj biases.
// llama-lora: PEFT 0.21.2 over the llama fixture with an adapter seedflow wrote (write-lora-adapter.ts).
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { createLocalEngine } from '../../engine/index.ts'
import { encodeCheckpoint } from '../../policy/checkpoint.ts'
import { importHuggingFaceFolder } from '../../policy/hf-import.ts'
import { decodePeftAdapter, LORA_TARGETS, mergeLora } from '../../policy/lora.ts'
import { meanNllFeeds } from '../../policy/losses.ts'
import { IO } from '../../policy/model.ts'
import { parameterSpecs } from '../../policy/parameters.ts'
import { decodeSafetensors, type RawTensor, toFloat32 } from '../../policy/safetensors.ts'
import { policyModel } from '../../policy/trainer.ts'

const fixture = (family: string, file = '') =>
  fileURLToPath(new URL(`../fixtures/reference/${family}/${file}`, import.meta.url))

async function loadExpected(family: string) {
  const { tensors } = decodeSafetensors(await readFile(fixture(family, 'expected.safetensors')))
  const ids = tensors.get('input_ids') as RawTensor
  const idValues = Array.from(new BigInt64Array(new Uint8Array(ids.data).buffer), Number)
  const [B, T] = ids.shape as [number, number]
  const rows = Array.from({ length: B }, (_, b) => idValues.slice(b * T, (b + 1) * T))
  return { tensors, rows, B, T }
}

for (const family of ['llama', 'qwen2', 'llama-bias']) {
  describe(`${family}: seedflow vs transformers`, () => {
    const engine = createLocalEngine({ threads: 1 })
    after(() => engine.close())

    it('reproduces the logits of the imported model (max abs difference ≤ 1e-4)', async (t) => {
      const { checkpoint } = await importHuggingFaceFolder(fixture(family))
      const { tensors, rows, T } = await loadExpected(family)
      const model = policyModel(engine, checkpoint.config, checkpoint.weights)
      const ours = await model.logits(rows)
      const expected = toFloat32(tensors.get('logits') as RawTensor)
      const V = checkpoint.config.vocabSize
      let worst = 0
      rows.forEach((_, b) => {
        const mine = ours[b] as Float64Array
        for (let i = 0; i < T * V; i++)
          worst = Math.max(worst, Math.abs((mine[i] as number) - (expected[b * T * V + i] as number)))
      })
      t.diagnostic(`max |logits − transformers| = ${worst.toExponential(2)}`)
      assert.ok(worst <= 1e-4, `max |logits − transformers| = ${worst}`)
    })

    it('reproduces the loss and every parameter gradient (relative difference ≤ 1e-3)', async (t) => {
      const { checkpoint } = await importHuggingFaceFolder(fixture(family))
      const { tensors, rows } = await loadExpected(family)
      const model = policyModel(engine, checkpoint.config, checkpoint.weights)
      // transformers' loss: mean cross-entropy over every next-token target
      const train = await model.gradientModel((op, scores) => {
        const mask = op.input('mask', 'float32', ['B', 'T'])
        return {
          loss: op.Div(
            op.Neg(op.ReduceSum(op.Mul(scores.logp, mask), undefined, { keepdims: 0 })),
            op.ReduceSum(mask, undefined, { keepdims: 0 }),
          ),
        }
      })
      const items = rows.map((row) => ({ context: row.slice(0, 1), response: row.slice(1) }))
      const out = await engine.run(train, meanNllFeeds(model, items), { kept: await model.parameters.kept() })
      const loss = Number(out[IO.loss]?.data[0])
      const expectedLoss = toFloat32(tensors.get('loss') as RawTensor)[0] as number
      assert.ok(Math.abs(loss - expectedLoss) <= 1e-5 * Math.abs(expectedLoss), `loss ${loss} vs ${expectedLoss}`)
      let worstRelative = 0
      for (const spec of parameterSpecs(checkpoint.config)) {
        const mine = out[`${spec.name}_grad`]?.data as Float32Array
        const theirs = toFloat32(tensors.get(`grad.${spec.name}`) as RawTensor)
        let diff = 0
        let norm = 0
        for (let i = 0; i < theirs.length; i++) {
          diff += ((mine[i] as number) - (theirs[i] as number)) ** 2
          norm += (theirs[i] as number) ** 2
        }
        const relative = Math.sqrt(diff / norm)
        worstRelative = Math.max(worstRelative, relative)
        assert.ok(relative <= 1e-3, `${spec.name}: relative gradient difference ${relative}`)
      }
      t.diagnostic(
        `loss ${loss} vs ${expectedLoss}; worst relative gradient difference ${worstRelative.toExponential(2)}`,
      )
    })
  })
}

describe('attention_bias round trip', () => {
  it('writes back exactly the tensors and config transformers wrote for a Llama with attention_bias', async () => {
    const { checkpoint } = await importHuggingFaceFolder(fixture('llama-bias'))
    assert.equal(checkpoint.config.qkvBias, true)
    assert.equal(checkpoint.config.outputBias, true)
    const files = encodeCheckpoint(checkpoint)
    const ours = decodeSafetensors(files['model.safetensors'] as Uint8Array).tensors
    const theirs = decodeSafetensors(await readFile(fixture('llama-bias', 'model.safetensors'))).tensors
    assert.deepEqual([...ours.keys()].sort(), [...theirs.keys()].sort())
    for (const [name, t] of theirs) assert.deepEqual(toFloat32(ours.get(name) as RawTensor), toFloat32(t), name)
    const config = JSON.parse(Buffer.from(files['config.json'] as Uint8Array).toString('utf8'))
    assert.equal(config.attention_bias, true)
  })
})

describe('llama-lora: seedflow vs PEFT', () => {
  const engine = createLocalEngine({ threads: 1 })
  after(() => engine.close())

  it('reproduces the logits of PEFT over the adapter seedflow wrote (max abs difference ≤ 1e-4), merged too', async (t) => {
    const { checkpoint } = await importHuggingFaceFolder(fixture('llama'))
    const adapter = decodePeftAdapter(checkpoint.config, {
      config: await readFile(fixture('llama-lora', 'adapter/adapter_config.json')),
      model: await readFile(fixture('llama-lora', 'adapter/adapter_model.safetensors')),
    })
    assert.deepEqual(adapter.lora.targets, LORA_TARGETS)
    const { tensors, rows, T } = await loadExpected('llama-lora')
    const V = checkpoint.config.vocabSize
    const gap = (ours: Float64Array[], name: string) => {
      const expected = toFloat32(tensors.get(name) as RawTensor)
      let worst = 0
      rows.forEach((_, b) => {
        for (let i = 0; i < T * V; i++)
          worst = Math.max(worst, Math.abs((ours[b]?.[i] as number) - (expected[b * T * V + i] as number)))
      })
      return worst
    }
    const lora = { config: adapter.lora, adapters: adapter.adapters }
    const withAdapter = await policyModel(engine, checkpoint.config, checkpoint.weights, { lora }).logits(rows)
    const merged = mergeLora(checkpoint.weights, adapter.adapters, checkpoint.config, adapter.lora)
    const plain = await policyModel(engine, checkpoint.config, checkpoint.weights).logits(rows)
    const worst = gap(withAdapter, 'logits')
    const mergedWorst = gap(await policyModel(engine, checkpoint.config, merged).logits(rows), 'merged_logits')
    const effect = gap(plain, 'logits')
    t.diagnostic(
      `max |logits − PEFT| ${worst.toExponential(2)}; merged vs PEFT merge_and_unload ${mergedWorst.toExponential(2)}; ` +
        `the adapter moves the logits by up to ${effect.toFixed(3)}`,
    )
    assert.ok(worst <= 1e-4, `max |logits − PEFT| = ${worst}`)
    assert.ok(mergedWorst <= 1e-4, `merged: max |logits − PEFT merged| = ${mergedWorst}`)
    assert.ok(effect > 0.1, `the adapter changes the logits (${effect})`)
  })
})
