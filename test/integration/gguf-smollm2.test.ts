// The real model: SmolLM2-135M-Instruct from its Q4_1 GGUF (fetched by infra/install-models.sh), imported by
// seedflow and compared with transformers reading the same file (fixtures written by
// test/fixtures/gguf/make_smollm2_fixtures.py): logits of a chat-formatted prompt, greedy decoding, the
// tokenizer built from the GGUF metadata, and `seedflow import` writing a folder seedflow reads back.
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { chatTemplateCodec } from '../../compute/index.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { mulberry32 } from '../../envs/rng.ts'
import { generate } from '../../policy/generate.ts'
import { importGguf } from '../../policy/gguf/gguf-import.ts'
import { importHuggingFaceFolder } from '../../policy/hf-import.ts'
import { decodeSafetensors, type RawTensor, toFloat32 } from '../../policy/safetensors.ts'
import { policyModel } from '../../policy/trainer.ts'
import { seedflow } from '../cli/seedflow-process.ts'
import { TEST_ENV } from './servers.ts'

const fixture = (file: string) => fileURLToPath(new URL(`../fixtures/gguf/${file}`, import.meta.url))
const ints = (t: RawTensor) => Array.from(new BigInt64Array(new Uint8Array(t.data).buffer), Number)

describe('SmolLM2-135M-Instruct GGUF vs transformers', () => {
  const gguf = process.env[TEST_ENV.model] as string
  const engine = createLocalEngine({ threads: 2 })
  let imported: Awaited<ReturnType<typeof importGguf>>
  let expected: Map<string, RawTensor>
  let metadata: Record<string, string>

  before(async () => {
    assert.ok(gguf, `${TEST_ENV.model} is not set: run through npm test`)
    imported = await importGguf(gguf)
    ;({ tensors: expected, metadata } = decodeSafetensors(await readFile(fixture('smollm2-logits.safetensors'))))
  })
  after(() => engine.close())

  it('maps the metadata to the model transformers builds (Llama, 30 layers, 9 / 3 heads, tied, rope 1e5)', () => {
    const c = imported.checkpoint.config
    assert.deepEqual(
      [c.family, c.numLayers, c.hiddenSize, c.numHeads, c.numKvHeads, c.vocabSize, c.tieEmbeddings, c.ropeTheta],
      ['llama', 30, 576, 9, 3, 49152, true, 100000],
    )
    assert.equal(c.rmsNormEps, 1e-5)
    assert.deepEqual(imported.types, { F32: 61, Q4_1: 210, Q8_0: 1 })
  })

  it("renders the prompt with the file's chat template and tokenizes it as transformers does", () => {
    const codec = chatTemplateCodec(imported.tokenizer, imported.chatTemplate as never)
    const text = imported.chatTemplate?.render([{ role: 'user', content: metadata.user as string }])
    assert.equal(text, metadata.prompt)
    assert.deepEqual(codec.promptIds(metadata.user as string), ints(expected.get('input_ids') as RawTensor))
  })

  it('gives the logits of transformers within 1e-3 and the same argmax at every position', async (t) => {
    const ids = ints(expected.get('input_ids') as RawTensor)
    const model = policyModel(engine, imported.checkpoint.config, imported.checkpoint.weights)
    const logits = (await model.logits([ids]))[0] as Float64Array
    const V = imported.checkpoint.config.vocabSize
    const T = ids.length
    assert.ok(T >= 64)
    const argmax = ints(expected.get('argmax') as RawTensor)
    const lse = toFloat32(expected.get('logsumexp') as RawTensor)
    const topIds = ints(expected.get('top_ids') as RawTensor)
    const topLogits = toFloat32(expected.get('top_logits') as RawTensor)
    const sampleIds = ints(expected.get('sample_ids') as RawTensor)
    const sampleLogits = toFloat32(expected.get('sample_logits') as RawTensor)
    const K = topIds.length / T
    let worst = 0
    let worstLse = 0
    for (let p = 0; p < T; p++) {
      const row = logits.subarray(p * V, (p + 1) * V)
      let best = 0
      let max = -Infinity
      for (let v = 0; v < V; v++) if ((row[v] as number) > max) [max, best] = [row[v] as number, v]
      assert.equal(best, argmax[p], `argmax at position ${p}`)
      let sum = 0
      for (let v = 0; v < V; v++) sum += Math.exp((row[v] as number) - max)
      worstLse = Math.max(worstLse, Math.abs(max + Math.log(sum) - (lse[p] as number)))
      for (let k = 0; k < K; k++)
        worst = Math.max(
          worst,
          Math.abs((row[topIds[p * K + k] as number] as number) - (topLogits[p * K + k] as number)),
        )
      sampleIds.forEach((v, k) => {
        worst = Math.max(worst, Math.abs((row[v] as number) - (sampleLogits[p * sampleIds.length + k] as number)))
      })
    }
    t.diagnostic(
      `${T} positions: max |logit − transformers| ${worst.toExponential(2)} over the top ${K} and ${sampleIds.length} fixed ids; ` +
        `max |logsumexp − transformers| ${worstLse.toExponential(2)} over whole rows`,
    )
    assert.ok(worst <= 1e-3, `max |logit − transformers| = ${worst}`)
    assert.ok(worstLse <= 1e-3, `max |logsumexp − transformers| = ${worstLse}`)
  })

  it('decodes the same 32 greedy tokens as transformers', async () => {
    const ids = ints(expected.get('input_ids') as RawTensor)
    const model = policyModel(engine, imported.checkpoint.config, imported.checkpoint.weights)
    const { sequences } = await generate(model, [ids], {
      maxNewTokens: 32,
      temperature: 1,
      greedy: true,
      eosIds: imported.checkpoint.eosIds,
      rngs: [mulberry32(1)],
    })
    assert.deepEqual(sequences[0]?.tokens, ints(expected.get('greedy') as RawTensor))
  })

  it('builds a tokenizer that encodes and decodes like transformers on 210 varied strings', async () => {
    const { cases } = JSON.parse(await readFile(fixture('smollm2-tokenizer.json'), 'utf8')) as {
      cases: { text: string; ids: number[]; decoded: string }[]
    }
    assert.ok(cases.length >= 200)
    const failures: string[] = []
    for (const c of cases) {
      const ids = imported.tokenizer.encode(c.text)
      if (JSON.stringify(ids) !== JSON.stringify(c.ids))
        failures.push(`encode ${JSON.stringify(c.text)}: ${ids} vs ${c.ids}`)
      else if (imported.tokenizer.decode(ids) !== c.decoded) failures.push(`decode ${JSON.stringify(c.text)}`)
    }
    assert.deepEqual(failures, [])
  })

  it('seedflow import writes a folder that seedflow reads back with its chat template', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'seedflow-gguf-'))
    try {
      const out = join(dir, 'smollm2')
      const result = await seedflow(['import', gguf, '--out', out], {})
      assert.equal(result.code, 0, result.err)
      assert.match(result.out, /imported .*SmolLM2-135M-Instruct\.Q4_1\.gguf/)
      const back = await importHuggingFaceFolder(out)
      assert.ok(back.chatTemplate)
      for (const [name, w] of imported.checkpoint.weights) assert.deepEqual(back.checkpoint.weights.get(name), w, name)
      const again = await seedflow(['import', gguf, '--out', out], {})
      assert.equal(again.code, 1)
      assert.match(again.err, /already exists/)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
