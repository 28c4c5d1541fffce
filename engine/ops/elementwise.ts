import { type DType, dtypeOfCode, isFloat, ONNX_DTYPE } from '../dtype.ts'
import { ShapeError } from '../errors.ts'
import { attr, type Value } from '../ir.ts'
import { defineOp, type Emit, type Grads, type InferFn, NONDIFFERENTIABLE, req } from '../op-def.ts'
import { formatShape } from '../shape.ts'
import { broadcastAll, same, sameDtype } from './infer.ts'

type Operand = Value | number

function binary(emit: Emit, a: Operand, b: Operand): Value {
  return emit.one([emit.valueOf(a, b), emit.valueOf(b, a)])
}

const binaryInfer =
  (opType: string, out?: DType): InferFn =>
  (inputs) => {
    const values = [req(opType, inputs, 0), req(opType, inputs, 1)]
    const dtype = sameDtype(opType, values)
    return [{ dtype: out ?? dtype, shape: broadcastAll(opType, values) }]
  }

const unaryInfer =
  (opType: string): InferFn =>
  (inputs) =>
    same(req(opType, inputs, 0))

export const Add = defineOp({
  opType: 'Add',
  build: binary,
  infer: binaryInfer('Add'),
  vjp: (op, { x: [a, b], dy }): Grads => [op.sumTo(dy, a!), op.sumTo(dy, b!)],
})

export const Sub = defineOp({
  opType: 'Sub',
  build: binary,
  infer: binaryInfer('Sub'),
  vjp: (op, { x: [a, b], dy, needs }): Grads => [op.sumTo(dy, a!), needs[1] ? op.sumTo(op.Neg(dy), b!) : null],
})

export const Mul = defineOp({
  opType: 'Mul',
  build: binary,
  infer: binaryInfer('Mul'),
  // d(a·b)/da = b, d(a·b)/db = a, each reduced over its broadcast axes
  vjp: (op, { x: [a, b], dy, needs }): Grads => [
    needs[0] ? op.sumTo(op.Mul(dy, b!), a!) : null,
    needs[1] ? op.sumTo(op.Mul(dy, a!), b!) : null,
  ],
})

export const Div = defineOp({
  opType: 'Div',
  build: binary,
  infer: binaryInfer('Div'),
  // y = a/b: da = dy/b, db = −dy·a/b² = −dy·y/b
  vjp: (op, { x: [a, b], y: [y], dy, needs }): Grads => [
    needs[0] ? op.sumTo(op.Div(dy, b!), a!) : null,
    needs[1] ? op.sumTo(op.Neg(op.Div(op.Mul(dy, y!), b!)), b!) : null,
  ],
})

export const Pow = defineOp({
  opType: 'Pow',
  build: (emit, x: Value, exponent: Operand) => emit.one([x, emit.valueOf(exponent, x)]),
  infer: binaryInfer('Pow'),
  // y = xᵖ: dx = dy·p·xᵖ⁻¹, dp = dy·y·ln x (x > 0 wherever p needs a gradient)
  vjp: (op, { x: [x, p], y: [y], dy, needs }): Grads => [
    needs[0] ? op.sumTo(op.Mul(dy, op.Mul(p!, op.Pow(x!, op.Sub(p!, 1)))), x!) : null,
    needs[1] ? op.sumTo(op.Mul(dy, op.Mul(y!, op.Log(x!))), p!) : null,
  ],
})

export const Max = defineOp({
  opType: 'Max',
  build: binary,
  infer: binaryInfer('Max'),
  // the gradient goes to the larger operand; ties go to the first
  vjp: (op, { x: [a, b], dy }): Grads => {
    const first = op.GreaterOrEqual(a!, b!)
    return [op.sumTo(op.Where(first, dy, 0), a!), op.sumTo(op.Where(first, 0, dy), b!)]
  },
})

export const Min = defineOp({
  opType: 'Min',
  build: binary,
  infer: binaryInfer('Min'),
  // the gradient goes to the smaller operand; ties go to the first
  vjp: (op, { x: [a, b], dy }): Grads => {
    const first = op.LessOrEqual(a!, b!)
    return [op.sumTo(op.Where(first, dy, 0), a!), op.sumTo(op.Where(first, 0, dy), b!)]
  },
})

export const Clip = defineOp({
  opType: 'Clip',
  build: (emit, x: Value, min?: Operand | null, max?: Operand | null) =>
    emit.one([x, min == null ? null : emit.valueOf(min, x), max == null ? null : emit.valueOf(max, x)]),
  infer: (inputs) => {
    const x = req('Clip', inputs, 0)
    for (const bound of inputs.slice(1)) {
      if (bound && (bound.shape.length !== 0 || bound.dtype !== x.dtype)) {
        throw new ShapeError(
          `Clip: bounds must be ${x.dtype} scalars, got ${bound.name}: ${bound.dtype}${formatShape(bound.shape)}`,
        )
      }
    }
    return same(x)
  },
  // dx = dy inside [min, max] (bounds included); each bound collects dy where x lies beyond it
  vjp: (op, { x: [x, min, max], dy, needs }): Grads => {
    let inside: Value | null = null
    if (min) inside = op.GreaterOrEqual(x!, min)
    if (max) inside = inside ? op.And(inside, op.LessOrEqual(x!, max)) : op.LessOrEqual(x!, max)
    return [
      inside ? op.Where(inside, dy, 0) : dy,
      min && needs[1] ? op.ReduceSum(op.Where(op.Less(x!, min), dy, 0), undefined, { keepdims: 0 }) : null,
      max && needs[2] ? op.ReduceSum(op.Where(op.Greater(x!, max), dy, 0), undefined, { keepdims: 0 }) : null,
    ]
  },
})

export const Neg = defineOp({
  opType: 'Neg',
  build: (emit, x: Value) => emit.one([x]),
  infer: unaryInfer('Neg'),
  vjp: (op, { dy }): Grads => [op.Neg(dy)],
})

export const Exp = defineOp({
  opType: 'Exp',
  build: (emit, x: Value) => emit.one([x]),
  infer: unaryInfer('Exp'),
  vjp: (op, { y: [y], dy }): Grads => [op.Mul(dy, y!)],
})

export const Log = defineOp({
  opType: 'Log',
  build: (emit, x: Value) => emit.one([x]),
  infer: unaryInfer('Log'),
  vjp: (op, { x: [x], dy }): Grads => [op.Div(dy, x!)],
})

export const Sqrt = defineOp({
  opType: 'Sqrt',
  build: (emit, x: Value) => emit.one([x]),
  infer: unaryInfer('Sqrt'),
  // y = √x: dx = dy / (2y)
  vjp: (op, { y: [y], dy }): Grads => [op.Div(dy, op.Mul(y!, 2))],
})

export const Reciprocal = defineOp({
  opType: 'Reciprocal',
  build: (emit, x: Value) => emit.one([x]),
  infer: unaryInfer('Reciprocal'),
  // y = 1/x: dx = −dy·y²
  vjp: (op, { y: [y], dy }): Grads => [op.Neg(op.Mul(dy, op.Mul(y!, y!)))],
})

export const Sigmoid = defineOp({
  opType: 'Sigmoid',
  build: (emit, x: Value) => emit.one([x]),
  infer: unaryInfer('Sigmoid'),
  // dx = dy·y·(1 − y)
  vjp: (op, { y: [y], dy }): Grads => [op.Mul(dy, op.Mul(y!, op.Sub(1, y!)))],
})

export const Tanh = defineOp({
  opType: 'Tanh',
  build: (emit, x: Value) => emit.one([x]),
  infer: unaryInfer('Tanh'),
  // dx = dy·(1 − y²)
  vjp: (op, { y: [y], dy }): Grads => [op.Mul(dy, op.Sub(1, op.Mul(y!, y!)))],
})

export const Abs = defineOp({
  opType: 'Abs',
  build: (emit, x: Value) => emit.one([x]),
  infer: unaryInfer('Abs'),
  // dx = dy·sign(x) (0 at x = 0)
  vjp: (op, { x: [x], dy }): Grads => [op.Mul(dy, op.Sign(x!))],
})

export const Sign = defineOp({
  opType: 'Sign',
  build: (emit, x: Value) => emit.one([x]),
  infer: unaryInfer('Sign'),
  vjp: NONDIFFERENTIABLE,
})

export const Where = defineOp({
  opType: 'Where',
  build: (emit, condition: Value, a: Operand, b: Operand) =>
    emit.one([condition, emit.valueOf(a, b), emit.valueOf(b, a)]),
  infer: (inputs) => {
    const c = req('Where', inputs, 0)
    const a = req('Where', inputs, 1)
    const b = req('Where', inputs, 2)
    if (c.dtype !== 'bool') throw new ShapeError(`Where: condition ${c.name} must be bool, got ${c.dtype}`)
    return [{ dtype: sameDtype('Where', [a, b]), shape: broadcastAll('Where', [c, a, b]) }]
  },
  vjp: (op, { x: [c, a, b], dy, needs }): Grads => [
    null,
    needs[1] ? op.sumTo(op.Where(c!, dy, 0), a!) : null,
    needs[2] ? op.sumTo(op.Where(c!, 0, dy), b!) : null,
  ],
})

export const Cast = defineOp({
  opType: 'Cast',
  build: (emit, x: Value, to: DType) => emit.one([x], { to: attr.int(ONNX_DTYPE[to]) }),
  infer: (inputs, attrs) => [{ dtype: dtypeOfCode('Cast', attrs.int('to')), shape: req('Cast', inputs, 0).shape }],
  // casting between float types passes the gradient back in the input's type; integer inputs get none
  vjp: (op, { x: [x], dy }): Grads => [isFloat(x!.dtype) ? op.Cast(dy, x!.dtype) : null],
})

export const Identity = defineOp({
  opType: 'Identity',
  build: (emit, x: Value) => emit.one([x]),
  infer: unaryInfer('Identity'),
  vjp: (_op, { dy }): Grads => [dy],
})

/** An Identity that blocks gradients: the value is treated as a constant by reverse-mode differentiation. */
export const stopGradient = defineOp({
  opType: 'Identity',
  build: (emit, x: Value) => emit.one([x]),
  infer: unaryInfer('Identity'),
  vjp: NONDIFFERENTIABLE,
})

const comparison = (opType: string) =>
  defineOp({ opType, build: binary, infer: binaryInfer(opType, 'bool'), vjp: NONDIFFERENTIABLE })

export const Equal = comparison('Equal')
export const Less = comparison('Less')
export const Greater = comparison('Greater')
export const LessOrEqual = comparison('LessOrEqual')
export const GreaterOrEqual = comparison('GreaterOrEqual')

const logical = (opType: string) =>
  defineOp({
    opType,
    build: (emit, a: Value, b: Value) => emit.one([a, b]),
    infer: binaryInfer(opType),
    vjp: NONDIFFERENTIABLE,
  })

export const And = logical('And')
export const Or = logical('Or')

export const Not = defineOp({
  opType: 'Not',
  build: (emit, x: Value) => emit.one([x]),
  infer: unaryInfer('Not'),
  vjp: NONDIFFERENTIABLE,
})
