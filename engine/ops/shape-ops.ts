import { ShapeError, UnsupportedGradientError } from '../errors.ts'
import { attr, type Value } from '../ir.ts'
import { defineOp, type Grads, NONDIFFERENTIABLE, req } from '../op-def.ts'
import {
  addDims,
  broadcastShapes,
  type Dim,
  formatShape,
  isUnknownDim,
  normalizeAxis,
  numel,
  type Shape,
  unknownDim,
} from '../shape.ts'
import { knownInts, sameDtype, sliceDim, staticLength } from './infer.ts'

type Ints = readonly number[] | Value

/** A dim as a number times named factors: 'T' → 1·[T], '2*T' → 2·[T], 8 → 8·[]; unknown dims → undefined. */
function factors(d: Dim): { n: number; names: string[] } | undefined {
  if (typeof d === 'number') return { n: d, names: [] }
  if (isUnknownDim(d)) return undefined
  let n = 1
  const names: string[] = []
  for (const part of d.split('*')) {
    if (/^\d+$/.test(part)) n *= Number(part)
    else names.push(part)
  }
  return { n, names }
}

/**
 * The −1 of a Reshape when dims are symbolic: (product of the input dims) / (product of the other output dims),
 * cancelling names, e.g. (B, KV, 2, T, D) → (0, 0, −1, D) gives 2*T, and back (0, 0, 2, −1, D) gives T.
 * Undefined when the names do not cancel.
 */
function symbolicQuotient(input: readonly Dim[], others: readonly Dim[]): Dim | undefined {
  let n = 1
  const names: string[] = []
  for (const d of input) {
    const f = factors(d)
    if (!f) return undefined
    n *= f.n
    names.push(...f.names)
  }
  let divisor = 1
  for (const d of others) {
    const f = factors(d)
    if (!f) return undefined
    divisor *= f.n
    for (const name of f.names) {
      const at = names.indexOf(name)
      if (at < 0) return undefined
      names.splice(at, 1)
    }
  }
  if (divisor === 0 || n % divisor !== 0) return undefined
  n /= divisor
  if (names.length === 0) return n
  names.sort()
  return n === 1 && names.length === 1 ? (names[0] as string) : [...(n === 1 ? [] : [String(n)]), ...names].join('*')
}

export const Reshape = defineOp({
  opType: 'Reshape',
  /** `shape` follows ONNX: 0 copies the input dim, −1 is inferred. */
  build: (emit, x: Value, shape: Ints) => emit.one([x, Array.isArray(shape) ? emit.ints(shape) : (shape as Value)]),
  infer: (inputs) => {
    const x = req('Reshape', inputs, 0)
    const target = req('Reshape', inputs, 1)
    const n = staticLength('Reshape', target)
    const known = target.known
    if (!known) return [{ dtype: x.dtype, shape: Array.from({ length: n }, () => unknownDim()) }]
    const out: Dim[] = known.map((d, i) => (d === 0 ? (x.shape[i] ?? 0) : d))
    const inferred = out.indexOf(-1)
    if (inferred >= 0) {
      const total = numel(x.shape)
      const rest = numel(out.filter((_, i) => i !== inferred))
      if (total !== undefined && rest !== undefined) {
        if (rest === 0 || total % rest !== 0) {
          throw new ShapeError(`Reshape: cannot reshape ${formatShape(x.shape)} to ${formatShape(known)}`)
        }
        out[inferred] = total / rest
      } else {
        out[inferred] =
          symbolicQuotient(
            x.shape,
            out.filter((_, i) => i !== inferred),
          ) ?? unknownDim()
      }
    } else {
      const a = numel(x.shape)
      const b = numel(out)
      if (a !== undefined && b !== undefined && a !== b) {
        throw new ShapeError(`Reshape: ${a} elements ${formatShape(x.shape)} into ${b} ${formatShape(out)}`)
      }
    }
    return [{ dtype: x.dtype, shape: out }]
  },
  vjp: (op, { x: [x], dy }): Grads => [op.Reshape(dy, op.shapeOf(x!)), null],
})

export const Transpose = defineOp({
  opType: 'Transpose',
  build: (emit, x: Value, perm?: readonly number[]) => emit.one([x], perm ? { perm: attr.ints(perm) } : {}),
  infer: (inputs, attrs) => {
    const x = req('Transpose', inputs, 0)
    const perm = attrs.ints('perm', [...x.shape.keys()].reverse())
    const sorted = [...perm].sort((a, b) => a - b)
    if (perm.length !== x.shape.length || sorted.some((p, i) => p !== i)) {
      throw new ShapeError(`Transpose: perm ${formatShape(perm)} does not fit ${formatShape(x.shape)}`)
    }
    return [{ dtype: x.dtype, shape: perm.map((p) => x.shape[p]!) }]
  },
  vjp: (op, { x: [x], dy, attrs }): Grads => {
    const perm = attrs.ints('perm', [...x!.shape.keys()].reverse())
    const inverse = perm.map((_, i) => perm.indexOf(i))
    return [op.Transpose(dy, inverse)]
  },
})

export const Unsqueeze = defineOp({
  opType: 'Unsqueeze',
  build: (emit, x: Value, axes: Ints) => emit.one([x, Array.isArray(axes) ? emit.ints(axes) : (axes as Value)]),
  infer: (inputs) => {
    const x = req('Unsqueeze', inputs, 0)
    const axesValue = req('Unsqueeze', inputs, 1)
    const axes = knownInts(axesValue)
    if (!axes) throw new ShapeError(`Unsqueeze: axes ${axesValue.name} must be known at build time`)
    const rank = x.shape.length + axes.length
    const set = new Set(axes.map((a) => normalizeAxis('Unsqueeze', a, rank)))
    const out: Dim[] = []
    let j = 0
    for (let i = 0; i < rank; i++) out.push(set.has(i) ? 1 : x.shape[j++]!)
    const known = x.known && x.shape.length === 0 ? x.known : undefined
    return [{ dtype: x.dtype, shape: out, ...(known ? { known } : {}) }]
  },
  vjp: (op, { x: [, axes], dy }): Grads => [op.Squeeze(dy, axes!), null],
})

export const Squeeze = defineOp({
  opType: 'Squeeze',
  build: (emit, x: Value, axes?: Ints) =>
    emit.one(axes === undefined ? [x] : [x, Array.isArray(axes) ? emit.ints(axes) : (axes as Value)]),
  infer: (inputs) => {
    const x = req('Squeeze', inputs, 0)
    const axesValue = inputs[1]
    if (!axesValue) {
      if (x.shape.some((d) => typeof d !== 'number')) {
        throw new ShapeError(`Squeeze: without axes every dim must be static, got ${formatShape(x.shape)}`)
      }
      return [{ dtype: x.dtype, shape: x.shape.filter((d) => d !== 1) }]
    }
    const axes = knownInts(axesValue)
    if (!axes) throw new ShapeError(`Squeeze: axes ${axesValue.name} must be known at build time`)
    const set = new Set(axes.map((a) => normalizeAxis('Squeeze', a, x.shape.length)))
    for (const a of set) {
      if (typeof x.shape[a] === 'number' && x.shape[a] !== 1) {
        throw new ShapeError(`Squeeze: axis ${a} of ${formatShape(x.shape)} is not 1`)
      }
    }
    const known = x.known && x.shape.length === 1 && set.size === 1 ? x.known : undefined
    return [{ dtype: x.dtype, shape: x.shape.filter((_, i) => !set.has(i)), ...(known ? { known } : {}) }]
  },
  vjp: (op, { x: [x, axes], dy }): Grads => [axes ? op.Unsqueeze(dy, axes) : op.Reshape(dy, op.shapeOf(x!)), null],
})

export const Concat = defineOp({
  opType: 'Concat',
  build: (emit, xs: readonly Value[], axis: number) => emit.one(xs, { axis: attr.int(axis) }),
  infer: (inputs, attrs) => {
    const xs = inputs.map((_, i) => req('Concat', inputs, i))
    const dtype = sameDtype('Concat', xs)
    const first = xs[0]!
    const axis = normalizeAxis('Concat', attrs.int('axis'), first.shape.length)
    const out: Dim[] = [...first.shape]
    for (const x of xs.slice(1)) {
      if (x.shape.length !== first.shape.length) {
        throw new ShapeError(`Concat: ranks differ (${xs.map((v) => formatShape(v.shape)).join(', ')})`)
      }
      x.shape.forEach((d, i) => {
        if (i === axis) out[i] = addDims(out[i]!, d)
        else if (typeof d === 'number' && typeof out[i] === 'number' && d !== out[i]) {
          throw new ShapeError(`Concat: dim ${i} differs (${xs.map((v) => formatShape(v.shape)).join(', ')})`)
        }
      })
    }
    const known = xs.every((x) => x.known && x.shape.length === 1) ? xs.flatMap((x) => x.known!) : undefined
    return [{ dtype, shape: out, ...(known ? { known } : {}) }]
  },
  // each input's gradient is its own slice of dy along the axis
  vjp: (op, { x: xs, dy, attrs }): Grads => {
    const axis = attrs.int('axis')
    const sizes = op.Concat(
      xs.map((x) => op.Gather(op.shapeOf(x!), op.ints([axis < 0 ? axis + x!.shape.length : axis]))),
      0,
    )
    return op.Split(dy, sizes, axis)
  },
})

export const Split = defineOp({
  opType: 'Split',
  /** Splits into parts of the given sizes along `axis`. */
  build: (emit, x: Value, sizes: Ints, axis = 0) =>
    emit([x, Array.isArray(sizes) ? emit.ints(sizes) : (sizes as Value)], { axis: attr.int(axis) }),
  infer: (inputs, attrs) => {
    const x = req('Split', inputs, 0)
    const sizesValue = req('Split', inputs, 1)
    const axis = normalizeAxis('Split', attrs.int('axis', 0), x.shape.length)
    const n = staticLength('Split', sizesValue)
    const sizes = sizesValue.known
    const total = sizes?.every((s) => typeof s === 'number')
      ? sizes.reduce<number>((a, b) => a + (b as number), 0)
      : undefined
    const d = x.shape[axis]!
    if (total !== undefined && typeof d === 'number' && total !== d) {
      throw new ShapeError(
        `Split: sizes ${formatShape(sizes!)} do not add up to dim ${axis} of ${formatShape(x.shape)}`,
      )
    }
    return Array.from({ length: n }, (_, i) => ({
      dtype: x.dtype,
      shape: x.shape.map((dim, j) => (j === axis ? (sizes?.[i] ?? unknownDim()) : dim)),
    }))
  },
  vjp: (op, { dys, attrs }): Grads => [op.Concat(dys, attrs.int('axis', 0)), null],
})

export const Slice = defineOp({
  opType: 'Slice',
  build: (emit, x: Value, starts: Ints, ends: Ints, axes?: Ints, steps?: Ints) => {
    const v = (a: Ints) => (Array.isArray(a) ? emit.ints(a) : (a as Value))
    const inputs = [x, v(starts), v(ends)]
    if (axes !== undefined || steps !== undefined)
      inputs.push(axes === undefined ? emit.ints(x.shape.map((_, i) => i)) : v(axes))
    if (steps !== undefined) inputs.push(v(steps))
    return emit.one(inputs)
  },
  infer: (inputs) => {
    const x = req('Slice', inputs, 0)
    const starts = knownInts(req('Slice', inputs, 1))
    const ends = knownInts(req('Slice', inputs, 2))
    const n = staticLength('Slice', req('Slice', inputs, 1))
    const axes = inputs[3] ? knownInts(inputs[3]) : Array.from({ length: n }, (_, i) => i)
    const steps = inputs[4] ? knownInts(inputs[4]) : Array.from({ length: n }, () => 1)
    const out: Dim[] = [...x.shape]
    if (!axes) return [{ dtype: x.dtype, shape: out.map(() => unknownDim()) }]
    axes.forEach((a, i) => {
      const axis = normalizeAxis('Slice', a, x.shape.length)
      out[axis] = starts && ends && steps ? sliceDim(x.shape[axis]!, starts[i]!, ends[i]!, steps[i]!) : unknownDim()
    })
    return [{ dtype: x.dtype, shape: out }]
  },
  // dx = dy placed back at the sliced window, zeros elsewhere: Pad with begin = clamped start and
  // end = dim − clamped end, computed in the graph so named dims work. Only step 1 is supported.
  vjp: (op, { node, x: [x, starts, ends, axesIn, steps], dy }): Grads => {
    const stepValues = steps ? knownInts(steps) : undefined
    if (steps && !stepValues?.every((s) => s === 1)) {
      throw new UnsupportedGradientError(node.opType, node.name, 'gradient only for step 1')
    }
    const axes = axesIn ?? op.ints(x!.shape.map((_, i) => i).slice(0, staticLength('Slice', starts!)))
    const dims = op.Gather(op.shapeOf(x!), axes)
    const clampIndex = (i: Value) => {
      const resolved = op.Where(op.Less(i, op.ints([0])), op.Add(i, dims), i)
      return op.Max(op.Min(resolved, dims), op.ints([0]))
    }
    const begin = clampIndex(starts!)
    const end = clampIndex(ends!)
    // full-rank pads rather than Pad's `axes` input: onnxruntime 1.30's transpose optimizer mishandles `axes`
    const zeros = op.ints(x!.shape.map(() => 0))
    const everyAxis = (v: Value) => op.ScatterElements(zeros, axes, v, 0, 'none')
    return [op.Pad(dy, op.Concat([everyAxis(begin), everyAxis(op.Sub(dims, end))], 0)), null, null, null, null]
  },
})

export const Pad = defineOp({
  opType: 'Pad',
  /** Constant-mode padding; `pads` = [begin per axis…, end per axis…] over `axes` (default every axis). */
  build: (emit, x: Value, pads: Ints, constantValue?: Value | number | null, axes?: Ints) => {
    const v = (a: Ints) => (Array.isArray(a) ? emit.ints(a) : (a as Value))
    if (Array.isArray(axes) && Array.isArray(pads)) {
      // static axes become full-rank pads (onnxruntime 1.30's transpose optimizer mishandles the `axes` input)
      const rank = x.shape.length
      const full = new Array<number>(2 * rank).fill(0)
      const [ax, pd] = [axes as readonly number[], pads as readonly number[]]
      ax.forEach((a, i) => {
        const axis = a < 0 ? a + rank : a
        full[axis] = pd[i]!
        full[axis + rank] = pd[i + ax.length]!
      })
      pads = full
      axes = undefined
    }
    const inputs: (Value | null)[] = [x, v(pads)]
    if (constantValue != null || axes !== undefined)
      inputs.push(constantValue == null ? null : emit.valueOf(constantValue, x))
    if (axes !== undefined) inputs.push(v(axes))
    return emit.one(inputs, { mode: attr.string('constant') })
  },
  infer: (inputs, attrs) => {
    const x = req('Pad', inputs, 0)
    if (attrs.string('mode', 'constant') !== 'constant') throw new ShapeError(`Pad: only constant mode is supported`)
    const pads = knownInts(req('Pad', inputs, 1))
    const axes = inputs[3] ? knownInts(inputs[3]) : x.shape.map((_, i) => i)
    if (!pads || !axes) return [{ dtype: x.dtype, shape: x.shape.map(() => unknownDim()) }]
    const out: Dim[] = [...x.shape]
    axes.forEach((a, i) => {
      const axis = normalizeAxis('Pad', a, x.shape.length)
      out[axis] = addDims(addDims(out[axis]!, pads[i]!), pads[i + axes.length]!)
    })
    return [{ dtype: x.dtype, shape: out }]
  },
  // dx = the unpadded window of dy (non-negative pads); the pad value collects Σdy − Σdx
  vjp: (op, { node, x: [x, pads, value, axesIn], dy, needs }): Grads => {
    const known = knownInts(pads)
    if (known?.some((p) => p < 0))
      throw new UnsupportedGradientError(node.opType, node.name, 'gradient only for pads ≥ 0')
    const axes = axesIn ?? op.ints(x!.shape.map((_, i) => i))
    const k = x!.shape.length === 0 ? 0 : staticLength('Pad', axes)
    const begin = op.Slice(pads!, [0], [k])
    const end = op.Slice(pads!, [k], [2 * k])
    const dx = op.Slice(dy, begin, op.Sub(op.Gather(op.Shape(dy), axes), end), axes)
    const dvalue =
      value && needs[2]
        ? op.Sub(op.ReduceSum(dy, undefined, { keepdims: 0 }), op.ReduceSum(dx, undefined, { keepdims: 0 }))
        : null
    return [dx, null, dvalue, null]
  },
})

export const Expand = defineOp({
  opType: 'Expand',
  build: (emit, x: Value, shape: Ints) => emit.one([x, Array.isArray(shape) ? emit.ints(shape) : (shape as Value)]),
  infer: (inputs) => {
    const x = req('Expand', inputs, 0)
    const target = req('Expand', inputs, 1)
    const n = staticLength('Expand', target)
    const known: Shape = target.known ?? Array.from({ length: n }, () => unknownDim())
    return [{ dtype: x.dtype, shape: broadcastShapes('Expand', x.shape, known) }]
  },
  vjp: (op, { x: [x], dy }): Grads => [op.sumTo(dy, x!), null],
})

export const ShapeOp = defineOp({
  opType: 'Shape',
  build: (emit, x: Value) => emit.one([x]),
  infer: (inputs) => {
    const x = req('Shape', inputs, 0)
    return [{ dtype: 'int64', shape: [x.shape.length], known: x.shape }]
  },
  vjp: NONDIFFERENTIABLE,
})

export const Size = defineOp({
  opType: 'Size',
  build: (emit, x: Value) => emit.one([x]),
  infer: (inputs) => {
    const x = req('Size', inputs, 0)
    const n = numel(x.shape)
    return [{ dtype: 'int64', shape: [], ...(n !== undefined ? { known: [n] } : {}) }]
  },
  vjp: NONDIFFERENTIABLE,
})
