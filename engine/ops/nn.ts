import { ONNX_DTYPE } from '../dtype.ts'
import { ShapeError } from '../errors.ts'
import { attr, type Value } from '../ir.ts'
import { defineOp, type Grads, req } from '../op-def.ts'
import { broadcastShapes, type Dim, formatShape, normalizeAxis } from '../shape.ts'
import { same, sameDtype } from './infer.ts'

export const MatMul = defineOp({
  opType: 'MatMul',
  build: (emit, a: Value, b: Value) => emit.one([a, b]),
  infer: (inputs) => {
    const a = req('MatMul', inputs, 0)
    const b = req('MatMul', inputs, 1)
    const dtype = sameDtype('MatMul', [a, b])
    const where = `(a=${formatShape(a.shape)}, b=${formatShape(b.shape)})`
    if (a.shape.length === 0 || b.shape.length === 0) throw new ShapeError(`MatMul: scalar operand ${where}`)
    const as = a.shape.length === 1 ? [1, a.shape[0]!] : a.shape
    const bs = b.shape.length === 1 ? [b.shape[0]!, 1] : b.shape
    const k1 = as[as.length - 1]!
    const k2 = bs[bs.length - 2]!
    if (typeof k1 === 'number' && typeof k2 === 'number' && k1 !== k2) {
      throw new ShapeError(`MatMul: inner dims ${k1} vs ${k2} ${where}`)
    }
    const batch = broadcastShapes('MatMul', as.slice(0, -2), bs.slice(0, -2))
    const out: Dim[] = [...batch]
    if (a.shape.length > 1) out.push(as[as.length - 2]!)
    if (b.shape.length > 1) out.push(bs[bs.length - 1]!)
    return [{ dtype, shape: out }]
  },
  // dA = dY · Bᵀ, dB = Aᵀ · dY, each reduced over broadcast batch axes; 1-D operands are lifted to
  // matrices ([K] → [1,K] on the left, [K,1] on the right) and dropped again after. A 2-D B (a weight) under a
  // batched A gets dB from A and dY flattened to rows: the batch sum happens inside one GEMM.
  vjp: (op, { x: [a, b], dy, needs }): Grads => {
    const aVec = a!.shape.length === 1
    const bVec = b!.shape.length === 1
    const a2 = aVec ? op.Unsqueeze(a!, [0]) : a!
    const b2 = bVec ? op.Unsqueeze(b!, [1]) : b!
    let g = bVec ? op.Unsqueeze(dy, [-1]) : dy
    g = aVec ? op.Unsqueeze(g, [-2]) : g
    let da: Value | null = null
    let db: Value | null = null
    if (needs[0]) {
      da = op.sumTo(op.MatMul(g, op.transposeLast(b2)), a2)
      if (aVec) da = op.Squeeze(da, [0])
    }
    if (needs[1]) {
      const k = a2.shape[a2.shape.length - 1]
      const n = b2.shape[1]
      if (b2.shape.length === 2 && a2.shape.length > 2 && typeof k === 'number' && typeof n === 'number') {
        // a weight matrix under batched inputs: one (K, B·T) × (B·T, N) product instead of B products and a sum
        // Aᵀ is materialised by a Transpose of the batched A (K first) and a Reshape that ORT cannot fuse into
        // the MatMul: its fused transposed-A GEMM (FusedMatMul transA) ran at 65–85 GFLOP/s on SmolLM2's
        // weight gradients where this copy plus a plain GEMM runs at 120–127 (docs/benchmarks.md §6.6)
        const r = a2.shape.length
        const at = op.Reshape(op.Transpose(a2, [r - 1, ...Array.from({ length: r - 1 }, (_, i) => i)]), [k, -1])
        db = op.MatMul(at, op.Reshape(g, [-1, n]))
      } else db = op.sumTo(op.MatMul(op.transposeLast(a2), g), b2)
      if (bVec) db = op.Squeeze(db, [1])
    }
    return [da, db]
  },
})

export const Softmax = defineOp({
  opType: 'Softmax',
  build: (emit, x: Value, axis = -1) => emit.one([x], { axis: attr.int(axis) }),
  infer: (inputs, attrs) => {
    const x = req('Softmax', inputs, 0)
    normalizeAxis('Softmax', attrs.int('axis', -1), x.shape.length)
    return same(x)
  },
  // dx = y ⊙ (dy − Σ_axis dy ⊙ y)
  vjp: (op, { y: [y], dy, attrs }): Grads => {
    const axis = attrs.int('axis', -1)
    return [op.Mul(y!, op.Sub(dy, op.ReduceSum(op.Mul(dy, y!), [axis])))]
  },
})

export const LogSoftmax = defineOp({
  opType: 'LogSoftmax',
  build: (emit, x: Value, axis = -1) => emit.one([x], { axis: attr.int(axis) }),
  infer: (inputs, attrs) => {
    const x = req('LogSoftmax', inputs, 0)
    normalizeAxis('LogSoftmax', attrs.int('axis', -1), x.shape.length)
    return same(x)
  },
  // y = x − logΣexp x: dx = dy − exp(y) ⊙ Σ_axis dy
  vjp: (op, { y: [y], dy, attrs }): Grads => {
    const axis = attrs.int('axis', -1)
    return [op.Sub(dy, op.Mul(op.Exp(y!), op.ReduceSum(dy, [axis])))]
  },
})

export const RMSNormalization = defineOp({
  opType: 'RMSNormalization',
  build: (emit, x: Value, scale: Value, options: { axis?: number; epsilon?: number } = {}) =>
    emit.one([x, scale], {
      axis: attr.int(options.axis ?? -1),
      epsilon: attr.float(options.epsilon ?? 1e-5),
      // statistics in float32, or in float64 for float64 inputs
      stash_type: attr.int(x.dtype === 'float64' ? ONNX_DTYPE.float64 : ONNX_DTYPE.float32),
    }),
  infer: (inputs, attrs) => {
    const x = req('RMSNormalization', inputs, 0)
    const scale = req('RMSNormalization', inputs, 1)
    sameDtype('RMSNormalization', [x, scale])
    const axis = normalizeAxis('RMSNormalization', attrs.int('axis', -1), x.shape.length)
    broadcastShapes('RMSNormalization', x.shape.slice(axis), scale.shape)
    return same(x)
  },
  // y = s ⊙ x ⊙ r with r = (mean(x²) + ε)^(−½) over the normalised axes; with g = dy ⊙ s:
  // dx = r ⊙ (g − x ⊙ r² ⊙ mean(g ⊙ x)),  ds = Σ_batch dy ⊙ x ⊙ r
  vjp: (op, { x: [x, s], dy, attrs, needs }): Grads => {
    const rank = x!.shape.length
    const axis = normalizeAxis('RMSNormalization', attrs.int('axis', -1), rank)
    const axes = Array.from({ length: rank - axis }, (_, i) => axis + i)
    const eps = attrs.float('epsilon', 1e-5)
    const r = op.Reciprocal(op.Sqrt(op.Add(op.ReduceMean(op.Mul(x!, x!), axes), eps)))
    let dx: Value | null = null
    if (needs[0]) {
      const g = op.Mul(dy, s!)
      const proj = op.Mul(op.Mul(x!, op.Mul(r, r)), op.ReduceMean(op.Mul(g, x!), axes))
      dx = op.Mul(r, op.Sub(g, proj))
    }
    return [dx, needs[1] ? op.sumTo(op.Mul(dy, op.Mul(x!, r)), s!) : null]
  },
})

export const Trilu = defineOp({
  opType: 'Trilu',
  build: (emit, x: Value, options: { k?: number | Value; upper?: 0 | 1 } = {}) => {
    const k =
      options.k === undefined ? null : typeof options.k === 'number' ? emit.constant(scalarInt(options.k)) : options.k
    return emit.one(k ? [x, k] : [x], { upper: attr.int(options.upper ?? 1) })
  },
  infer: (inputs) => {
    const x = req('Trilu', inputs, 0)
    if (x.shape.length < 2)
      throw new ShapeError(`Trilu: input ${x.name} must have rank ≥ 2, got ${formatShape(x.shape)}`)
    return same(x)
  },
  // a mask of fixed positions: the gradient is masked the same way
  vjp: (op, { x: [, k], dy, attrs }): Grads => [
    op.Trilu(dy, { k: k ?? 0, upper: attrs.int('upper', 1) === 1 ? 1 : 0 }),
    null,
  ],
})

function scalarInt(k: number) {
  return { dtype: 'int64' as const, dims: [], data: BigInt64Array.of(BigInt(k)) }
}
