import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { trainByteLevelBpe } from '../../policy/bpe-trainer.ts'
import { ChatTemplate } from '../../policy/chat-template.ts'
import { BUILTIN_PROMPTS_KEY, decodeCheckpoint, encodeCheckpoint } from '../../policy/checkpoint.ts'
import { type ModelConfig, ModelConfigError, PRESETS } from '../../policy/config.ts'
import { huggingFaceFolderFiles, importHuggingFaceFolder } from '../../policy/hf-import.ts'
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
  /** A single-file folder of CONFIG's model (config.json overridable) with a byte-level BPE tokenizer. */
  async function folder(files: Record<string, string>, hfConfig?: (c: Record<string, unknown>) => void) {
    const dir = await mkdtemp(join(tmpdir(), 'seedflow-hf-'))
    const weights = new Map(
      parameterSpecs(CONFIG).map((s) => [s.name, new Float32Array(s.shape.reduce((a, b) => a * b, 1))]),
    )
    const encoded = encodeCheckpoint({
      config: CONFIG,
      weights,
      eosIds: [2],
      tokenizerConfig: { chat_template: CHATML },
    })
    const config = JSON.parse(Buffer.from(encoded['config.json'] as Uint8Array).toString('utf8'))
    hfConfig?.(config)
    await writeFile(join(dir, 'model.safetensors'), encoded['model.safetensors'] as Uint8Array)
    await writeFile(join(dir, 'config.json'), JSON.stringify(config))
    const tokenizerJson = trainByteLevelBpe(['hello world'], {
      vocabSize: 300,
      specialTokens: ['<|endoftext|>', '<|im_start|>', '<|im_end|>'],
    })
    await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(tokenizerJson))
    for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text)
    return dir
  }

  it('reads the chat template from chat_template.jinja (transformers 5) and carries it into its checkpoints', async () => {
    const dir = await folder({
      'chat_template.jinja': CHATML,
      'tokenizer_config.json': JSON.stringify({ eos_token: '<|im_end|>' }),
    })
    try {
      assert.ok((await huggingFaceFolderFiles(dir)).includes('chat_template.jinja'))
      const imported = await importHuggingFaceFolder(dir)
      assert.equal(
        imported.chatTemplate?.render([{ role: 'user', content: 'x' }]),
        '<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n',
      )
      // seedflow's checkpoint (stored, exported) keeps it in tokenizer_config.json, which transformers reads too
      const files = encodeCheckpoint(imported.checkpoint)
      const tokenizerConfig = JSON.parse(Buffer.from(files['tokenizer_config.json'] as Uint8Array).toString('utf8'))
      assert.equal(tokenizerConfig.chat_template, CHATML)
      assert.equal(tokenizerConfig.eos_token, '<|im_end|>')
      const config = JSON.parse(Buffer.from(files['config.json'] as Uint8Array).toString('utf8'))
      assert.equal(config[BUILTIN_PROMPTS_KEY], undefined)
      assert.deepEqual(decodeCheckpoint(files).tokenizerConfig, tokenizerConfig)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('refuses a model without a chat template, but reads a built-in model checkpoint (plain prompts)', async () => {
    const dir = await folder({ 'tokenizer_config.json': JSON.stringify({ eos_token: '<|im_end|>' }) })
    try {
      await assert.rejects(importHuggingFaceFolder(dir), /has no chat template \(neither chat_template\.jinja nor/)
      const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'))
      await writeFile(join(dir, 'config.json'), JSON.stringify({ ...config, [BUILTIN_PROMPTS_KEY]: true }))
      assert.equal((await importHuggingFaceFolder(dir)).chatTemplate, undefined)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  for (const [field, value] of [
    ['hidden_act', 'gelu'],
    ['mlp_bias', true],
    ['use_sliding_window', true],
    ['pretraining_tp', 2],
  ] as const) {
    it(`refuses a config with ${field}: ${JSON.stringify(value)}, naming the field`, async () => {
      const dir = await folder({ 'chat_template.jinja': CHATML }, (c) => {
        c[field] = value
      })
      try {
        await assert.rejects(
          importHuggingFaceFolder(dir),
          (e: Error) =>
            e instanceof ModelConfigError && e.message.includes(`${field} ${JSON.stringify(value)} is not implemented`),
        )
      } finally {
        await rm(dir, { recursive: true, force: true })
      }
    })
  }
})
