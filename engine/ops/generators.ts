import type { DType } from '../dtype.ts'
import { ShapeError } from '../errors.ts'
import { attr, type ConstTensor, constTensor, type Value, type ValueInfo } from '../ir.ts'
import { defineOp, NONDIFFERENTIABLE, req } from '../op-def.ts'
import { formatShape, unknownDim } from '../shape.ts'
import { knownInts, staticLength } from './infer.ts'

export const Constant = defineOp({
  opType: 'Constant',
  build: (emit, tensor: ConstTensor) => emit.one([], { value: attr.tensor(tensor) }),
  infer: (_inputs, attrs) => [constantInfo(attrs.tensor('value'))],
  vjp: NONDIFFERENTIABLE,
})

/** Small integer constants carry their elements, so shape inference can read shapes and axes. */
function constantInfo(tensor: ConstTensor): ValueInfo {
  const small = tensor.data instanceof BigInt64Array || tensor.data instanceof Int32Array
  const known =
    small && tensor.dims.length <= 1 && tensor.data.length <= 64 ? Array.from(tensor.data, Number) : undefined
  return { dtype: tensor.dtype, shape: tensor.dims, ...(known ? { known } : {}) }
}

export const ConstantOfShape = defineOp({
  opType: 'ConstantOfShape',
  build: (emit, shape: Value, value: number, dtype: DType) =>
    emit.one([shape], { value: attr.tensor(constTensor(dtype, [1], [value])) }),
  infer: (inputs, attrs) => {
    const shape = req('ConstantOfShape', inputs, 0)
    const n = staticLength('ConstantOfShape', shape)
    const dtype = attrs.tensor('value').dtype
    return [{ dtype, shape: shape.known ?? Array.from({ length: n }, () => unknownDim()) }]
  },
  vjp: NONDIFFERENTIABLE,
})

export const Range = defineOp({
  opType: 'Range',
  build: (emit, start: Value | number, limit: Value | number, delta: Value | number = 1) =>
    emit.one([
      emit.valueOf(start, limit),
      emit.valueOf(limit, start),
      emit.valueOf(delta, typeof start === 'number' ? limit : start),
    ]),
  infer: (inputs) => {
    const [start, limit, delta] = [0, 1, 2].map((i) => req('Range', inputs, i))
    for (const v of [start!, limit!, delta!]) {
      if (v.shape.length !== 0) throw new ShapeError(`Range: ${v.name} must be a scalar, got ${formatShape(v.shape)}`)
    }
    const [s, l, d] = [start, limit, delta].map((v) => knownInts(v)?.[0])
    const n = s !== undefined && l !== undefined && d !== undefined ? Math.max(0, Math.ceil((l - s) / d)) : unknownDim()
    return [{ dtype: start!.dtype, shape: [n] }]
  },
  vjp: NONDIFFERENTIABLE,
})
