import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type Checkpoint, CheckpointError, decodeCheckpoint, encodeCheckpoint } from '../../policy/checkpoint.ts'
import { type ModelConfig, PRESETS } from '../../policy/config.ts'
import { parameterSpecs } from '../../policy/parameters.ts'
import { decodeSafetensors, encodeSafetensors, fromFloat32 } from '../../policy/safetensors.ts'

const SMALL: ModelConfig = {
  ...PRESETS.tiny,
  vocabSize: 64,
  hiddenSize: 16,
  intermediateSize: 24,
  numLayers: 2,
  headDim: 8,
  numHeads: 2,
  numKvHeads: 1,
}

function filled(config: ModelConfig): Checkpoint {
  const weights = new Map<string, Float32Array>()
  let k = 0
  for (const spec of parameterSpecs(config)) {
    const w = new Float32Array(spec.shape.reduce((a, b) => a * b, 1))
    for (let i = 0; i < w.length; i++) w[i] = Math.sin(++k)
    weights.set(spec.name, w)
  }
  return { config, weights, eosIds: [0], tokenizerJson: { version: '1.0' } }
}

describe('checkpoints', () => {
  it('round-trips config, every weight and the tokenizer', () => {
    for (const config of [SMALL, { ...SMALL, family: 'qwen2' as const, qkvBias: true, tieEmbeddings: false }]) {
      const original = filled(config)
      const back = decodeCheckpoint(encodeCheckpoint(original))
      assert.deepEqual(back.config, config)
      assert.deepEqual([...back.weights.keys()].sort(), [...original.weights.keys()].sort())
      for (const [name, w] of original.weights) assert.deepEqual(back.weights.get(name), w, name)
      assert.deepEqual(back.tokenizerJson, { version: '1.0' })
      assert.deepEqual(back.eosIds, [0])
    }
  })

  it('rejects weights whose shape does not match the config, naming the tensor and both shapes', () => {
    const files = encodeCheckpoint(filled(SMALL))
    const wider = { ...JSON.parse(Buffer.from(files['config.json'] as Uint8Array).toString()), intermediate_size: 32 }
    files['config.json'] = Buffer.from(JSON.stringify(wider))
    assert.throws(
      () => decodeCheckpoint(files, 'ck'),
      (e: unknown) =>
        e instanceof CheckpointError &&
        e.message ===
          'ck/model.safetensors: tensor model.layers.0.mlp.gate_proj.weight has shape [24, 16] but the config expects [32, 16]',
    )
  })

  it('rejects a missing and an unknown tensor', () => {
    const files = encodeCheckpoint(filled(SMALL))
    const { tensors } = decodeSafetensors(files['model.safetensors'] as Uint8Array)
    tensors.delete('model.norm.weight')
    assert.throws(
      () => decodeCheckpoint({ ...files, 'model.safetensors': encodeSafetensors(tensors) }),
      /tensor model\.norm\.weight is missing \(config expects shape \[16\]\)/,
    )
    tensors.set('model.norm.weight', fromFloat32(new Float32Array(16), [16]))
    tensors.set('model.layers.9.mlp.up_proj.weight', fromFloat32(new Float32Array(4), [2, 2]))
    assert.throws(
      () => decodeCheckpoint({ ...files, 'model.safetensors': encodeSafetensors(tensors) }),
      /tensor model\.layers\.9\.mlp\.up_proj\.weight is not part of a llama model with this config/,
    )
  })

  it('rejects a corrupted (truncated) weights file', () => {
    const files = encodeCheckpoint(filled(SMALL))
    const bytes = files['model.safetensors'] as Uint8Array
    assert.throws(
      () => decodeCheckpoint({ ...files, 'model.safetensors': bytes.subarray(0, bytes.length - 100) }, 'ck'),
      /ck\/model\.safetensors: tensor .* outside the data/,
    )
  })
})
