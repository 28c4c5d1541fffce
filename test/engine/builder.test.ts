import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { createBuilder } from '../../engine/builder.ts'
import { GraphError, ShapeError } from '../../engine/errors.ts'
import { Graph } from '../../engine/ir.ts'
import { encodeModel } from '../../engine/onnx.ts'
import { createLocalEngine } from '../../engine/runtime.ts'
import { tensor } from '../../engine/tensor.ts'

const engine = createLocalEngine({ threads: 1 })
after(() => engine.close())

function builder() {
  const graph = new Graph('t')
  return { graph, op: createBuilder(graph) }
}

describe('shape inference', () => {
  it('MatMul names both shapes when inner dims differ', () => {
    const { op } = builder()
    const a = op.input('a', 'float32', [4, 16, 64])
    const b = op.input('b', 'float32', [128, 32])
    assert.throws(() => op.MatMul(a, b), new ShapeError('MatMul: inner dims 64 vs 128 (a=[4,16,64], b=[128,32])'))
  })

  it('broadcasting rejects incompatible static dims', () => {
    const { op } = builder()
    const a = op.input('a', 'float32', ['B', 3])
    const b = op.input('b', 'float32', [4])
    assert.throws(() => op.Add(a, b), new ShapeError('Add: cannot broadcast [B,3] with [4] (dim 3 vs 4)'))
  })

  it('mixed dtypes are a shape error naming both inputs', () => {
    const { op } = builder()
    const a = op.input('a', 'float32', [2])
    const b = op.input('b', 'float64', [2])
    assert.throws(() => op.Mul(a, b), new ShapeError('Mul: inputs must share one dtype (a: float32[2], b: float64[2])'))
  })

  it('keeps named dims through attention-shaped ops', () => {
    const { op } = builder()
    const x = op.input('x', 'float32', ['B', 'T', 32])
    const past = op.input('past', 'float32', ['B', 4, 'P', 8])
    const heads = op.Transpose(op.Reshape(x, [0, 0, 4, 8]), [0, 2, 1, 3]) // (B, H, T, D)
    const keys = op.Concat([past, heads], 2) // (B, H, P+T, D)
    const scores = op.MatMul(heads, op.transposeLast(keys)) // (B, H, T, P+T)
    assert.deepEqual(heads.shape, ['B', 4, 'T', 8])
    assert.deepEqual(scores.shape, ['B', 4, 'T', 'P+T'])
    assert.deepEqual(op.Slice(x, [1], [2 ** 62], [1]).shape, ['B', 'T-1', 32])
    assert.deepEqual(op.ReduceSum(scores, [-1], { keepdims: 0 }).shape, ['B', 4, 'T'])
    assert.deepEqual(op.Gather(op.input('emb', 'float32', [100, 32]), op.input('ids', 'int64', ['B', 'T'])).shape, [
      'B',
      'T',
      32,
    ])
  })

  it('Reshape infers −1 from static dims and rejects a size mismatch', () => {
    const { op } = builder()
    const x = op.input('x', 'float32', [2, 3, 4])
    assert.deepEqual(op.Reshape(x, [-1, 4]).shape, [6, 4])
    assert.throws(() => op.Reshape(x, [5, 5]), new ShapeError('Reshape: 24 elements [2,3,4] into 25 [5,5]'))
  })
})

describe('graph', () => {
  it('rejects a duplicate name', () => {
    const { op } = builder()
    op.input('x', 'float32', [1])
    assert.throws(() => op.input('x', 'float32', [1]), new GraphError('name "x" is already used in graph t'))
  })

  it('shares equal constants', () => {
    const { op } = builder()
    assert.equal(op.scalar(2, 'float32'), op.scalar(2, 'float32'))
    assert.notEqual(op.scalar(2, 'float32'), op.scalar(2, 'float64'))
  })

  it('scopes node names', () => {
    const { op } = builder()
    const x = op.input('x', 'float32', [1])
    const y = op.scope('h0.attn', () => op.Neg(x))
    assert.equal(y.name, 'h0.attn/Neg_0')
  })
})

describe('causalMask', () => {
  it('is lower-triangular for a full sequence and offset by the cache length when decoding', async () => {
    const { graph, op } = builder()
    const q = op.input('q', 'float32', ['T', 1])
    const k = op.input('k', 'float32', ['S', 1])
    op.output(op.Cast(op.causalMask(op.dim(q, 0), op.dim(k, 0)), 'int32'), 'mask')
    const model = await engine.load(encodeModel(graph))
    const mask = async (tq: number, tk: number) => {
      const out = await engine.run(model, {
        q: tensor('float32', [tq, 1], new Float32Array(tq)),
        k: tensor('float32', [tk, 1], new Float32Array(tk)),
      })
      return Array.from(out.mask!.data as Int32Array)
    }
    assert.deepEqual(await mask(3, 3), [1, 0, 0, 1, 1, 0, 1, 1, 1])
    assert.deepEqual(await mask(2, 4), [1, 1, 1, 0, 1, 1, 1, 1])
  })
})

describe('Reshape shape inference with symbolic dims', () => {
  it('names the −1 by cancelling names: (B, KV, 2, T, D) ↔ (B, KV, 2*T, D)', () => {
    const op = createBuilder(new Graph('reshape'))
    const x = op.input('x', 'float32', ['B', 4, 2, 'T', 8])
    const stacked = op.Reshape(x, [0, 0, -1, 8])
    assert.deepEqual(stacked.shape, ['B', 4, '2*T', 8])
    assert.deepEqual(op.Reshape(stacked, [0, 0, 2, -1, 8]).shape, ['B', 4, 2, 'T', 8])
    const one = op.input('y', 'float32', ['B', 4, 1, 'T', 8])
    assert.deepEqual(op.Reshape(one, [0, 0, -1, 8]).shape, ['B', 4, 'T', 8])
  })
})
