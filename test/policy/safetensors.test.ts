import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  decodeSafetensors,
  encodeSafetensors,
  fromFloat32,
  type RawTensor,
  SafetensorsError,
  toFloat32,
} from '../../policy/safetensors.ts'

describe('safetensors', () => {
  it('round-trips named float32 tensors and metadata, with deterministic bytes', () => {
    const tensors = new Map<string, RawTensor>([
      ['model.norm.weight', fromFloat32(Float32Array.from([1, 2, 3]), [3])],
      ['lm_head.weight', fromFloat32(Float32Array.from([0.5, -1, 2, 4, 8, 16]), [2, 3])],
    ])
    const bytes = encodeSafetensors(tensors, { format: 'pt' })
    assert.deepEqual(encodeSafetensors(new Map([...tensors].reverse()), { format: 'pt' }), bytes)
    const file = decodeSafetensors(bytes)
    assert.deepEqual(file.metadata, { format: 'pt' })
    assert.deepEqual([...toFloat32(file.tensors.get('lm_head.weight') as RawTensor)], [0.5, -1, 2, 4, 8, 16])
    assert.deepEqual((file.tensors.get('lm_head.weight') as RawTensor).shape, [2, 3])
    const headerLength = Number(new DataView(bytes.buffer).getBigUint64(0, true))
    assert.equal(headerLength % 8, 0)
  })

  it('reads bf16 and f16 values', () => {
    // 1.5 in bf16 = 0x3fc0; -2 in f16 = 0xc000
    const bf16 = { dtype: 'BF16' as const, shape: [1], data: new Uint8Array([0xc0, 0x3f]) }
    const f16 = { dtype: 'F16' as const, shape: [1], data: new Uint8Array([0x00, 0xc0]) }
    assert.deepEqual([...toFloat32(bf16)], [1.5])
    assert.deepEqual([...toFloat32(f16)], [-2])
  })

  it('rejects a truncated file, naming the tensor and the sizes', () => {
    const bytes = encodeSafetensors(new Map([['w', fromFloat32(new Float32Array(16), [4, 4])]]))
    assert.throws(
      () => decodeSafetensors(bytes.subarray(0, bytes.byteLength - 4), 'model.safetensors'),
      (e: unknown) => {
        assert.ok(e instanceof SafetensorsError)
        assert.match(e.message, /model\.safetensors: tensor w offsets \[0,64\] outside the data \(60 bytes\)/)
        return true
      },
    )
  })

  it('rejects a header whose shape does not match its byte range', () => {
    const bytes = encodeSafetensors(new Map([['w', fromFloat32(new Float32Array(6), [2, 3])]]))
    const text = Buffer.from(bytes).toString('latin1').replace('[2,3]', '[3,3]')
    assert.throws(
      () => decodeSafetensors(Buffer.from(text, 'latin1')),
      /tensor w F32\[3, 3\] needs 36 bytes, offsets give 24/,
    )
  })

  it('rejects garbage', () => {
    assert.throws(() => decodeSafetensors(new Uint8Array(4)), SafetensorsError)
    assert.throws(() => decodeSafetensors(new Uint8Array(64).fill(0xff)), SafetensorsError)
  })
})
