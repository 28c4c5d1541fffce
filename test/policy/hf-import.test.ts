import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { trainByteLevelBpe } from '../../policy/bpe-trainer.ts'
import { ChatTemplate } from '../../policy/chat-template.ts'
import { encodeCheckpoint } from '../../policy/checkpoint.ts'
import { type ModelConfig, PRESETS } from '../../policy/config.ts'
import { importHuggingFaceFolder } from '../../policy/hf-import.ts'
import { parameterSpecs } from '../../policy/parameters.ts'
import { decodeSafetensors, encodeSafetensors, type RawTensor } from '../../policy/safetensors.ts'

// Qwen2's ChatML template, shortened (no tools).
const CHATML =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

const CONFIG: ModelConfig = {
  ...PRESETS['qwen2.5-0.5b'],
  vocabSize: 300,
  hiddenSize: 16,
  intermediateSize: 24,
  numLayers: 2,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 8,
}

describe('Hugging Face import', () => {
  it('renders a ChatML chat template', () => {
    const template = new ChatTemplate(CHATML)
    assert.equal(
      template.render([
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ]),
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    )
  })

  it('imports a sharded Qwen2 folder with its tokenizer, chat template and generation config', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'seedflow-hf-'))
    try {
      const weights = new Map(
        parameterSpecs(CONFIG).map((s, i) => [s.name, new Float32Array(s.shape.reduce((a, b) => a * b, 1)).fill(i)]),
      )
      const tokenizerJson = trainByteLevelBpe(['hello world'], {
        vocabSize: 300,
        specialTokens: ['<|endoftext|>', '<|im_start|>', '<|im_end|>'],
      })
      const files = encodeCheckpoint({ config: CONFIG, weights, eosIds: [0] })
      const { tensors } = decodeSafetensors(files['model.safetensors'] as Uint8Array)
      const names = [...tensors.keys()]
      const shards = [names.slice(0, 5), names.slice(5)].map(
        (part) => new Map(part.map((n) => [n, tensors.get(n) as RawTensor])),
      )
      const weightMap: Record<string, string> = {}
      for (const [i, shard] of shards.entries()) {
        const file = `model-0000${i + 1}-of-00002.safetensors`
        await writeFile(join(dir, file), encodeSafetensors(shard))
        for (const name of shard.keys()) weightMap[name] = file
      }
      await writeFile(
        join(dir, 'model.safetensors.index.json'),
        JSON.stringify({ metadata: {}, weight_map: weightMap }),
      )
      await writeFile(join(dir, 'config.json'), files['config.json'] as Uint8Array)
      await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(tokenizerJson))
      await writeFile(
        join(dir, 'tokenizer_config.json'),
        JSON.stringify({ chat_template: CHATML, eos_token: '<|im_end|>' }),
      )
      await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [2, 0] }))

      const imported = await importHuggingFaceFolder(dir)
      assert.deepEqual(imported.checkpoint.config, CONFIG)
      for (const [name, w] of weights) assert.deepEqual(imported.checkpoint.weights.get(name), w, name)
      assert.deepEqual(imported.tokenizer.eosIds, [2, 0])
      assert.equal(imported.tokenizer.decode(imported.tokenizer.encode('hello world')), 'hello world')
      assert.match(
        imported.chatTemplate?.render([{ role: 'user', content: 'x' }]) ?? '',
        /^<\|im_start\|>user\nx<\|im_end\|>/,
      )
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
