import type { Builder } from '../builder.ts'
import { ShapeError } from '../errors.ts'
import { attr, type Value } from '../ir.ts'
import { defineOp, type Emit, type Grads, type InferFn, NONDIFFERENTIABLE, req } from '../op-def.ts'
import { formatShape, normalizeAxis, unknownDim } from '../shape.ts'
import { knownInts, reduceShape } from './infer.ts'

export interface ReduceOptions {
  /** ONNX default 1: keep reduced axes as size 1. */
  keepdims?: 0 | 1
}

/** Reduce ops take axes as an input (opset 18+); omitted axes reduce over every axis. */
function reduceBuild(emit: Emit, x: Value, axes?: readonly number[] | Value, options: ReduceOptions = {}): Value {
  const axesValue = axes === undefined ? null : Array.isArray(axes) ? emit.ints(axes) : (axes as Value)
  return emit.one(axesValue ? [x, axesValue] : [x], { keepdims: attr.int(options.keepdims ?? 1) })
}

const reduceInfer =
  (opType: string): InferFn =>
  (inputs, attrs) => {
    const x = req(opType, inputs, 0)
    const axesValue = inputs[1]
    const keepdims = attrs.int('keepdims', 1) === 1
    if (!axesValue) return [{ dtype: x.dtype, shape: reduceShape(opType, x.shape, undefined, keepdims) }]
    const axes = knownInts(axesValue)
    if (axes?.length === 0) return [{ dtype: x.dtype, shape: reduceShape(opType, x.shape, undefined, keepdims) }]
    if (axes) return [{ dtype: x.dtype, shape: reduceShape(opType, x.shape, axes, keepdims) }]
    if (!keepdims) throw new ShapeError(`${opType}: axes ${axesValue.name} must be known at build time when keepdims=0`)
    return [{ dtype: x.dtype, shape: x.shape.map(() => unknownDim()) }]
  }

/** dy with the reduced axes restored as size 1. */
function keptGradient(op: Builder, dy: Value, axes: Value | null, keepdims: boolean): Value {
  return keepdims || !axes ? dy : op.Unsqueeze(dy, axes)
}

/** y with the reduced axes restored as size 1. */
const kept = keptGradient

export const ReduceSum = defineOp({
  opType: 'ReduceSum',
  build: reduceBuild,
  infer: reduceInfer('ReduceSum'),
  vjp: (op, { x: [x, axes], dy, attrs }): Grads => [
    op.Expand(keptGradient(op, dy, axes ?? null, attrs.int('keepdims', 1) === 1), op.shapeOf(x!)),
    null,
  ],
})

/** Σ x² over the axes: a gradient's squared norm without a squared copy of it. */
export const ReduceSumSquare = defineOp({
  opType: 'ReduceSumSquare',
  build: reduceBuild,
  infer: reduceInfer('ReduceSumSquare'),
  // dx = 2·x·dy
  vjp: (op, { x: [x, axes], dy, attrs }): Grads => [
    op.Mul(
      op.Mul(op.Expand(keptGradient(op, dy, axes ?? null, attrs.int('keepdims', 1) === 1), op.shapeOf(x!)), x!),
      2,
    ),
    null,
  ],
})

export const ReduceMean = defineOp({
  opType: 'ReduceMean',
  build: reduceBuild,
  infer: reduceInfer('ReduceMean'),
  // dx = dy / n, with n = size(x) / size(y) the number of elements averaged
  vjp: (op, { x: [x, axes], y: [y], dy, attrs }): Grads => {
    const n = op.Cast(op.Div(op.Size(x!), op.Size(y!)), x!.dtype)
    return [
      op.Expand(op.Div(keptGradient(op, dy, axes ?? null, attrs.int('keepdims', 1) === 1), n), op.shapeOf(x!)),
      null,
    ]
  },
})

export const ReduceMax = defineOp({
  opType: 'ReduceMax',
  build: reduceBuild,
  infer: reduceInfer('ReduceMax'),
  // dx = dy at the maximal elements, split evenly between ties
  vjp: (op, { x: [x, axes], y: [y], dy, attrs }): Grads => {
    const keepdims = attrs.int('keepdims', 1) === 1
    const hit = op.Cast(op.Equal(x!, kept(op, y!, axes ?? null, keepdims)), x!.dtype)
    const share = op.Div(hit, op.ReduceSum(hit, axes ?? undefined, { keepdims: 1 }))
    return [op.Mul(share, keptGradient(op, dy, axes ?? null, keepdims)), null]
  },
})

export const ReduceLogSumExp = defineOp({
  opType: 'ReduceLogSumExp',
  build: reduceBuild,
  infer: reduceInfer('ReduceLogSumExp'),
  // y = log Σ exp x: dx = dy · exp(x − y)
  vjp: (op, { x: [x, axes], y: [y], dy, attrs }): Grads => {
    const keepdims = attrs.int('keepdims', 1) === 1
    const p = op.Exp(op.Sub(x!, kept(op, y!, axes ?? null, keepdims)))
    return [op.Mul(p, keptGradient(op, dy, axes ?? null, keepdims)), null]
  },
})

export const ArgMax = defineOp({
  opType: 'ArgMax',
  build: (emit, x: Value, axis = 0, options: ReduceOptions = {}) =>
    emit.one([x], { axis: attr.int(axis), keepdims: attr.int(options.keepdims ?? 1) }),
  infer: (inputs, attrs) => {
    const x = req('ArgMax', inputs, 0)
    const axis = normalizeAxis('ArgMax', attrs.int('axis', 0), x.shape.length)
    if (x.shape.length === 0) throw new ShapeError(`ArgMax: scalar input ${x.name} ${formatShape(x.shape)}`)
    return [{ dtype: 'int64', shape: reduceShape('ArgMax', x.shape, [axis], attrs.int('keepdims', 1) === 1) }]
  },
  vjp: NONDIFFERENTIABLE,
})
