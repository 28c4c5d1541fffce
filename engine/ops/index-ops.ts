import { ShapeError, UnsupportedGradientError } from '../errors.ts'
import { attr, type Value } from '../ir.ts'
import { defineOp, type Grads, req } from '../op-def.ts'
import { type Dim, formatShape, normalizeAxis } from '../shape.ts'
import { knownInts, sameDtype } from './infer.ts'

function checkIndices(opType: string, indices: Value): void {
  if (indices.dtype !== 'int64' && indices.dtype !== 'int32') {
    throw new ShapeError(`${opType}: indices ${indices.name} must be int64 or int32, got ${indices.dtype}`)
  }
}

export const Gather = defineOp({
  opType: 'Gather',
  build: (emit, data: Value, indices: Value, axis = 0) => emit.one([data, indices], { axis: attr.int(axis) }),
  infer: (inputs, attrs) => {
    const data = req('Gather', inputs, 0)
    const indices = req('Gather', inputs, 1)
    checkIndices('Gather', indices)
    const axis = normalizeAxis('Gather', attrs.int('axis', 0), data.shape.length)
    const shape = [...data.shape.slice(0, axis), ...indices.shape, ...data.shape.slice(axis + 1)]
    const at = knownInts(indices)
    const known =
      data.known && data.shape.length === 1 && at
        ? at.map((i) => data.known![i < 0 ? i + data.known!.length : i]!)
        : undefined
    return [{ dtype: data.dtype, shape, ...(known ? { known } : {}) }]
  },
  // dx = zeros with dy added back at the gathered rows (repeated indices accumulate). Axis 0 (the embedding
  // case) is one ScatterND; another axis flattens the indices and scatters element-wise along that axis.
  vjp: (op, { x: [data, indices], dy, attrs }): Grads => {
    const rank = data!.shape.length
    const axis = normalizeAxis('Gather', attrs.int('axis', 0), rank)
    const zeros = op.zerosLike(data!)
    if (axis === 0) return [op.ScatterND(zeros, op.Unsqueeze(indices!, [-1]), dy, 'add'), null]
    const dataShape = op.Shape(data!)
    const flatShape = op.Concat(
      [op.Slice(dataShape, [0], [axis]), op.ints([-1]), op.Slice(dataShape, [axis + 1], [rank])],
      0,
    )
    const updates = op.Reshape(dy, flatShape)
    const lifted = op.Reshape(
      indices!,
      Array.from({ length: rank }, (_, i) => (i === axis ? -1 : 1)),
    )
    return [op.ScatterElements(zeros, op.Expand(lifted, op.Shape(updates)), updates, axis, 'add'), null]
  },
})

export const GatherElements = defineOp({
  opType: 'GatherElements',
  build: (emit, data: Value, indices: Value, axis = 0) => emit.one([data, indices], { axis: attr.int(axis) }),
  infer: (inputs, attrs) => {
    const data = req('GatherElements', inputs, 0)
    const indices = req('GatherElements', inputs, 1)
    checkIndices('GatherElements', indices)
    normalizeAxis('GatherElements', attrs.int('axis', 0), data.shape.length)
    if (indices.shape.length !== data.shape.length) {
      throw new ShapeError(
        `GatherElements: ranks differ (data=${formatShape(data.shape)}, indices=${formatShape(indices.shape)})`,
      )
    }
    return [{ dtype: data.dtype, shape: indices.shape }]
  },
  vjp: (op, { x: [data, indices], dy, attrs }): Grads => [
    op.ScatterElements(op.zerosLike(data!), indices!, dy, attrs.int('axis', 0), 'add'),
    null,
  ],
})

export const GatherND = defineOp({
  opType: 'GatherND',
  build: (emit, data: Value, indices: Value) => emit.one([data, indices]),
  infer: (inputs) => {
    const data = req('GatherND', inputs, 0)
    const indices = req('GatherND', inputs, 1)
    checkIndices('GatherND', indices)
    const last = indices.shape[indices.shape.length - 1]
    if (typeof last !== 'number' || last > data.shape.length) {
      throw new ShapeError(
        `GatherND: last indices dim must be static and ≤ rank (data=${formatShape(data.shape)}, indices=${formatShape(indices.shape)})`,
      )
    }
    const shape: Dim[] = [...indices.shape.slice(0, -1), ...data.shape.slice(last)]
    return [{ dtype: data.dtype, shape }]
  },
  vjp: (op, { x: [data, indices], dy }): Grads => [op.ScatterND(op.zerosLike(data!), indices!, dy, 'add'), null],
})

type Reduction = 'none' | 'add'

function scatterReduction(node: { opType: string; name: string }, reduction: string): Reduction {
  if (reduction !== 'none' && reduction !== 'add') {
    throw new UnsupportedGradientError(node.opType, node.name, `no gradient for reduction '${reduction}'`)
  }
  return reduction
}

export const ScatterElements = defineOp({
  opType: 'ScatterElements',
  build: (
    emit,
    data: Value,
    indices: Value,
    updates: Value,
    axis = 0,
    reduction: 'none' | 'add' | 'mul' | 'max' | 'min' = 'none',
  ) => emit.one([data, indices, updates], { axis: attr.int(axis), reduction: attr.string(reduction) }),
  infer: (inputs, attrs) => {
    const data = req('ScatterElements', inputs, 0)
    const indices = req('ScatterElements', inputs, 1)
    const updates = req('ScatterElements', inputs, 2)
    checkIndices('ScatterElements', indices)
    sameDtype('ScatterElements', [data, updates])
    normalizeAxis('ScatterElements', attrs.int('axis', 0), data.shape.length)
    return [{ dtype: data.dtype, shape: data.shape }]
  },
  // reduction add: d data = dy, d updates = dy gathered at the indices. reduction none (indices distinct):
  // overwritten positions pass no gradient to data.
  vjp: (op, { node, x: [data, indices, updates], dy, attrs, needs }): Grads => {
    const axis = attrs.int('axis', 0)
    const reduction = scatterReduction(node, attrs.string('reduction', 'none'))
    const ddata = !needs[0]
      ? null
      : reduction === 'add'
        ? dy
        : op.ScatterElements(dy, indices!, op.zerosLike(updates!), axis, 'none')
    void data
    return [ddata, null, needs[2] ? op.GatherElements(dy, indices!, axis) : null]
  },
})

export const ScatterND = defineOp({
  opType: 'ScatterND',
  build: (
    emit,
    data: Value,
    indices: Value,
    updates: Value,
    reduction: 'none' | 'add' | 'mul' | 'max' | 'min' = 'none',
  ) => emit.one([data, indices, updates], { reduction: attr.string(reduction) }),
  infer: (inputs) => {
    const data = req('ScatterND', inputs, 0)
    const indices = req('ScatterND', inputs, 1)
    const updates = req('ScatterND', inputs, 2)
    checkIndices('ScatterND', indices)
    sameDtype('ScatterND', [data, updates])
    return [{ dtype: data.dtype, shape: data.shape }]
  },
  // as ScatterElements, with GatherND reading the updated slices back
  vjp: (op, { node, x: [, indices, updates], dy, attrs, needs }): Grads => {
    const reduction = scatterReduction(node, attrs.string('reduction', 'none'))
    const ddata = !needs[0]
      ? null
      : reduction === 'add'
        ? dy
        : op.ScatterND(dy, indices!, op.zerosLike(updates!), 'none')
    return [ddata, null, needs[2] ? op.GatherND(dy, indices!) : null]
  },
})
