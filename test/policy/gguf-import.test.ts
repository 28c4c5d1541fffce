// The GGUF importer's mapping layer without the real file (the integration tier checks SmolLM2 against
// transformers): tensor names, llama.cpp's q/k row order, config values stored as float32, and the refusals.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ggufModelConfig, shortestFloat32 } from '../../policy/gguf/gguf-config.ts'
import type { GgufTensorInfo } from '../../policy/gguf/gguf-file.ts'
import { huggingFaceName, unpermuteRows } from '../../policy/gguf/gguf-import.ts'
import { ggufTokenizer } from '../../policy/gguf/gguf-tokenizer.ts'
import { TextTokenizer } from '../../policy/tokenizer.ts'

/** llama.cpp's converter order for q/k rows: each head's rotary halves interleaved. */
function permuteRows(values: Float32Array, heads: number, rowLength: number): Float32Array {
  const D = values.length / rowLength / heads
  const out = new Float32Array(values.length)
  for (let h = 0; h < heads; h++)
    for (let s = 0; s < 2; s++)
      for (let i = 0; i < D / 2; i++)
        out.set(
          values.subarray((h * D + s * (D / 2) + i) * rowLength, (h * D + s * (D / 2) + i + 1) * rowLength),
          (h * D + 2 * i + s) * rowLength,
        )
  return out
}

const METADATA = {
  'general.architecture': 'llama',
  'llama.block_count': 2,
  'llama.context_length': 256,
  'llama.embedding_length': 32,
  'llama.feed_forward_length': 48,
  'llama.attention.head_count': 4,
  'llama.attention.head_count_kv': 2,
  'llama.rope.freq_base': 100000,
  'llama.attention.layer_norm_rms_epsilon': Math.fround(1e-5),
  'llama.vocab_size': 300,
}
const tensor = (name: string): GgufTensorInfo => ({
  name,
  shape: [1],
  type: 0,
  typeName: 'F32',
  elements: 1,
  byteOffset: 0,
  byteLength: 4,
})

describe('GGUF import mapping', () => {
  it("maps llama.cpp's tensor names to Hugging Face's", () => {
    assert.equal(huggingFaceName('token_embd.weight'), 'model.embed_tokens.weight')
    assert.equal(huggingFaceName('blk.12.attn_q.weight'), 'model.layers.12.self_attn.q_proj.weight')
    assert.equal(huggingFaceName('blk.0.attn_output.bias'), 'model.layers.0.self_attn.o_proj.bias')
    assert.equal(huggingFaceName('blk.3.ffn_down.weight'), 'model.layers.3.mlp.down_proj.weight')
    assert.equal(huggingFaceName('output.weight'), 'lm_head.weight')
    assert.equal(huggingFaceName('blk.0.attn_q_norm.weight'), undefined)
  })

  it("undoes the converter's q/k row interleaving exactly", () => {
    const rows = 4 * 8
    const w = Float32Array.from({ length: rows * 3 }, (_, i) => i)
    assert.deepEqual(unpermuteRows(permuteRows(w, 4, 3), 4, 3), w)
    assert.notDeepEqual(permuteRows(w, 4, 3), w)
  })

  it('reads float32-stored config values as the decimals they were (rms_norm_eps 1e-5)', () => {
    assert.equal(shortestFloat32(Math.fround(1e-5)), 1e-5)
    assert.equal(shortestFloat32(Math.fround(1e-6)), 1e-6)
    assert.equal(shortestFloat32(100000), 100000)
    const c = ggufModelConfig(METADATA, [tensor('token_embd.weight')], 'x.gguf')
    assert.deepEqual([c.rmsNormEps, c.headDim, c.tieEmbeddings, c.qkvBias], [1e-5, 8, true, false])
    const biased = ggufModelConfig(
      METADATA,
      ['output.weight', 'blk.0.attn_q.bias', 'blk.0.attn_output.bias'].map(tensor),
      'x.gguf',
    )
    assert.deepEqual([biased.tieEmbeddings, biased.qkvBias, biased.outputBias], [false, true, true])
  })

  it('refuses an unsupported architecture, rope scaling or partial rotary by name', () => {
    assert.throws(
      () => ggufModelConfig({ ...METADATA, 'general.architecture': 'gemma3' }, [], 'x.gguf'),
      /architecture "gemma3" is not supported/,
    )
    assert.throws(
      () => ggufModelConfig({ ...METADATA, 'llama.rope.scaling.type': 'yarn' }, [], 'x.gguf'),
      /rope\.scaling\.type "yarn"/,
    )
    assert.throws(
      () => ggufModelConfig({ ...METADATA, 'llama.rope.dimension_count': 4 }, [], 'x.gguf'),
      /rotates part of each head/,
    )
    assert.throws(() => ggufModelConfig(METADATA, [tensor('rope_freqs.weight')], 'x.gguf'), /rope_freqs\.weight/)
  })

  it('builds a byte-level BPE tokenizer.json from the metadata and refuses other tokenizer models by name', () => {
    const bytes = Array.from({ length: 256 }, (_, b) => b)
    const spell = (b: number) =>
      String.fromCodePoint(
        (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174
          ? b
          : 256 + bytes.filter((x) => x < b && !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)).length,
      )
    const tokens = [
      '<|endoftext|>',
      '<|im_start|>',
      '<|im_end|>',
      ...bytes.map(spell),
      'he',
      'll',
      'hell',
      'hello',
      'Ġw',
    ]
    const metadata = {
      'general.architecture': 'llama',
      'tokenizer.ggml.model': 'gpt2',
      'tokenizer.ggml.pre': 'smollm',
      'tokenizer.ggml.tokens': tokens,
      'tokenizer.ggml.token_type': tokens.map((_, i) => (i < 3 ? 3 : 1)),
      'tokenizer.ggml.merges': ['h e', 'l l', 'he ll', 'hell o', 'Ġ w'],
      'tokenizer.ggml.bos_token_id': 1,
      'tokenizer.ggml.eos_token_id': 2,
      'tokenizer.chat_template': '{{ messages[0].content }}',
    }
    const t = ggufTokenizer(metadata, 'x.gguf')
    assert.deepEqual(
      [t.eosIds, t.bosId, t.tokenizerConfig.eos_token, t.tokenizerConfig.chat_template],
      [[2], 1, '<|im_end|>', '{{ messages[0].content }}'],
    )
    const tokenizer = new TextTokenizer(t.tokenizerJson, t.tokenizerConfig, t.eosIds)
    const hello = tokenizer.encode('hello<|im_end|> w12')
    assert.deepEqual(hello.slice(0, 3), [tokens.indexOf('hello'), 2, tokens.indexOf('Ġw')])
    assert.deepEqual(
      hello.slice(3).map((id) => tokens[id]),
      ['1', '2'],
    ) // smollm: every digit alone
    assert.equal(tokenizer.decode(hello), 'hello<|im_end|> w12')
    assert.throws(
      () => ggufTokenizer({ ...metadata, 'tokenizer.ggml.model': 'llama' }, 'x.gguf'),
      /tokenizer model "llama" is not supported/,
    )
    assert.throws(
      () => ggufTokenizer({ ...metadata, 'tokenizer.ggml.pre': 'chatglm-bpe' }, 'x.gguf'),
      /pre-tokenizer "chatglm-bpe" is not supported/,
    )
  })
})
