import type { DType } from './dtype.ts'
import { GraphError, ShapeError } from './errors.ts'
import { type Attrs, type ConstTensor, constTensor, type Graph, type Value, type ValueInfo } from './ir.ts'
import { attrReader, type Emit, type OpDef } from './op-def.ts'
import { OPS, type OpName, type Ops } from './ops/index.ts'
import { type Dim, formatShape, isUnknownDim, type Shape } from './shape.ts'

/** One method per op in `OPS`, named as the op (`op.MatMul`, `op.ReduceSum`, `op.stopGradient`). */
export type OpMethods = {
  [K in OpName]: Ops[K] extends OpDef<infer A, infer R> ? (...args: A) => R : never
}

/** Composites and graph plumbing; camelCase because none of them is one ONNX op. */
export interface Helpers {
  readonly graph: Graph
  /** A graph input (weights are inputs too). */
  input(name: string, dtype: DType, shape: Shape): Value
  /** Marks a graph output, renaming it (or adding an Identity) when `name` is given. */
  output(value: Value, name?: string): Value
  /** Gives a node output a readable name (`h3.attn.q`); gradients are then named `h3.attn.q_grad`. */
  named(value: Value, name: string): Value
  /** Prefixes the names of nodes built inside `fn` with `prefix/`. */
  scope<R>(prefix: string, fn: () => R): R
  /** A constant tensor (small: constants live in the graph); equal constants are shared. */
  constant(tensor: ConstTensor): Value
  /** A 1-D int64 constant. */
  ints(values: readonly number[]): Value
  /** A scalar constant. */
  scalar(value: number, dtype: DType): Value
  /**
   * `x`'s shape as a 1-D int64 value, built from the shapes of graph inputs where `x`'s dims are numbers or
   * names the inputs declare (`'B'`, `'3*T'`), else `Shape(x)`. Gradient rules use it: a backward node that
   * reads `Shape(x)` keeps all of x alive until it runs, for its shape alone.
   */
  shapeOf(x: Value): Value
  /** The size of one axis of `x` at run time, as an int64 scalar. */
  dim(x: Value, axis: number): Value
  /** Zeros of `x`'s shape and dtype. */
  zerosLike(x: Value): Value
  /** Swaps the last two axes. */
  transposeLast(x: Value): Value
  /**
   * Reduces a broadcast gradient `g` back to `target`'s shape: sums the leading axes that broadcasting
   * added and the axes where the target has size 1. Static where shapes decide it (a named dim is never a
   * broadcast 1); dims that shape inference could not name are resolved at run time.
   */
  sumTo(g: Value, target: Value): Value
  /**
   * Boolean (Tq, Tk) mask: query i, at absolute position Tk − Tq + i, may attend to key j iff j ≤ Tk − Tq + i.
   * Tq = Tk gives the usual lower-triangular mask; Tq < Tk is decoding after a KV cache of Tk − Tq positions.
   */
  causalMask(queryLength: Value | number, keyLength: Value | number): Value
  /**
   * Builds `fn`'s nodes as one block (see `Block`): the backward pass finishes the blocks after it before it
   * starts on this one. With `recompute: inputs`, the backward pass rebuilds the block from those inputs
   * (tied to the gradient that reaches it, so the runtime neither runs the copy early nor merges it with the
   * forward nodes) and the block's values need not stay alive from the forward pass.
   */
  block<R>(name: string, fn: () => R, options?: { recompute?: readonly Value[] }): R
  /** A forward-only node of an op that is not in `OPS` (e.g. a com.microsoft kernel); it has no gradient rule. */
  customOp(
    opType: string,
    inputs: readonly (Value | null)[],
    outputs: readonly ValueInfo[],
    attrs?: Attrs,
    domain?: string,
  ): Value[]
}

export type Builder = OpMethods & Helpers

/** A builder that appends to `graph`. Methods come from the `OPS` table; nothing is registered globally. */
export function createBuilder(graph: Graph): Builder {
  const constants = new Map<string, Value>()
  const emitters = new Map<string, Emit>()
  const methods: Record<string, unknown> = {}

  const emitterFor = (key: OpName): Emit => {
    const existing = emitters.get(key)
    if (existing) return existing
    const def = OPS[key] as OpDef
    const emit = ((inputs: readonly (Value | null)[], attrs: Attrs = {}) => {
      const infos = def.infer(inputs, attrReader(def.opType, attrs))
      return graph.addNode(key, def.opType, def.domain, inputs, attrs, infos)
    }) as Emit
    Object.assign(emit, {
      graph,
      one: (inputs: readonly (Value | null)[], attrs?: Attrs) => emit(inputs, attrs)[0]!,
      constant: (tensor: ConstTensor) => helpers.constant(tensor),
      ints: (values: readonly number[]) => helpers.ints(values),
      valueOf: (x: Value | number, like: Value | number) => {
        if (typeof x !== 'number') return x
        if (typeof like === 'number') throw new GraphError(`${def.opType}: at least one operand must be a Value`)
        return helpers.scalar(x, like.dtype)
      },
    })
    emitters.set(key, emit)
    return emit
  }

  for (const key of Object.keys(OPS) as OpName[]) {
    const def = OPS[key] as OpDef
    methods[key] = (...args: unknown[]) => def.build(emitterFor(key), ...args)
  }
  const op = methods as OpMethods
  // a named dim as a [1] int64 value read off the first graph input that declares it (graph inputs stay alive)
  const named = new Map<string, Value>()
  const dimValue = (d: Dim): Value | undefined => {
    if (typeof d === 'number') return helpers.ints([d])
    const scaled = /^(\d+)\*([A-Za-z_]\w*)$/.exec(d)
    if (scaled) {
      const base = dimValue(scaled[2] as string)
      return base && op.Mul(base, helpers.ints([Number(scaled[1])]))
    }
    let value = named.get(d)
    if (!value) {
      const source = graph.inputs.find((v) => v.shape.includes(d))
      if (!source) return undefined
      value = op.Gather(op.Shape(source), helpers.ints([source.shape.indexOf(d)]))
      named.set(d, value)
    }
    return value
  }

  const helpers: Helpers = {
    graph,
    input: (name, dtype, shape) => graph.input(name, dtype, shape),
    output: (value, name) => graph.output(value, name),
    named: (value, name) => graph.rename(value, name),
    scope: (prefix, fn) => graph.scoped(prefix, fn),
    constant(tensor) {
      const key = `${tensor.dtype}|${tensor.dims.join(',')}|${Array.from(tensor.data as ArrayLike<number | bigint>).join(',')}`
      let value = constants.get(key)
      if (!value) {
        value = op.Constant(tensor)
        constants.set(key, value)
      }
      return value
    },
    ints: (values) => helpers.constant(constTensor('int64', [values.length], values)),
    scalar: (value, dtype) => helpers.constant(constTensor(dtype, [], [value])),
    shapeOf(x) {
      if (!x.producer) return op.Shape(x)
      const pieces = x.shape.map(dimValue)
      if (pieces.some((p) => p === undefined)) return op.Shape(x)
      if (x.shape.every((d) => typeof d === 'number')) return helpers.ints(x.shape as number[])
      return op.Concat(pieces as Value[], 0)
    },
    dim: (x, axis) =>
      op.Gather(op.Shape(x), helpers.constant(constTensor('int64', [], [axis < 0 ? axis + x.shape.length : axis]))),
    zerosLike: (x) => op.ConstantOfShape(helpers.shapeOf(x), 0, x.dtype),
    transposeLast(x) {
      const rank = x.shape.length
      if (rank < 2) throw new ShapeError(`transposeLast: ${x.name} has rank ${rank} ${formatShape(x.shape)}`)
      const perm = [...x.shape.keys()]
      perm[rank - 2] = rank - 1
      perm[rank - 1] = rank - 2
      return op.Transpose(x, perm)
    },
    sumTo(g, target) {
      const ts = target.shape
      const gs = g.shape
      const lead = gs.length - ts.length
      if (lead < 0)
        throw new ShapeError(`sumTo: gradient ${formatShape(gs)} has lower rank than ${target.name} ${formatShape(ts)}`)
      const ones: number[] = []
      const runtime: number[] = []
      ts.forEach((td, i) => {
        const gd = gs[lead + i]!
        if (td === gd) return
        if (td === 1) ones.push(lead + i)
        else if (typeof td === 'number' && typeof gd === 'number') {
          throw new ShapeError(`sumTo: cannot reduce ${formatShape(gs)} to ${target.name} ${formatShape(ts)}`)
        } else if (isUnknownDim(td)) runtime.push(i)
      })
      let r = g
      if (ones.length > 0) r = op.ReduceSum(r, ones, { keepdims: 1 })
      if (lead > 0)
        r = op.ReduceSum(
          r,
          Array.from({ length: lead }, (_, i) => i),
          { keepdims: 0 },
        )
      // an unnamed target dim may be a broadcast 1 at run time: sum that axis, keep the sum only where the
      // target's dim is 1, then cut the axis to the target's length
      for (const axis of runtime) {
        const size = op.Reshape(helpers.dim(target, axis), [1])
        const summed = op.Expand(op.ReduceSum(r, [axis], { keepdims: 1 }), op.Shape(r))
        const chosen = op.Where(op.Equal(size, helpers.ints([1])), summed, r)
        r = op.Slice(chosen, [0], size, [axis])
      }
      return r
    },
    causalMask(queryLength, keyLength) {
      const asScalar = (v: Value | number) =>
        typeof v === 'number' ? helpers.constant(constTensor('int64', [], [v])) : v
      const tq = asScalar(queryLength)
      const tk = asScalar(keyLength)
      const zero = helpers.constant(constTensor('int64', [], [0]))
      const one = helpers.constant(constTensor('int64', [], [1]))
      const rows = op.Unsqueeze(op.Add(op.Range(zero, tq, one), op.Sub(tk, tq)), [1]) // (Tq, 1) absolute positions
      const cols = op.Unsqueeze(op.Range(zero, tk, one), [0]) // (1, Tk)
      return op.LessOrEqual(cols, rows) // (Tq, Tk)
    },
    block(name, fn, options = {}) {
      const first = graph.nodes.length
      const result = graph.scoped(name, fn)
      const nodes = new Set(graph.nodes.slice(first).map((n) => n.id))
      graph.blocks.push({ name, nodes, recompute: options.recompute ? [...options.recompute] : null })
      return result
    },
    customOp: (opType, inputs, outputs, attrs = {}, domain = '') =>
      graph.addNode(null, opType, domain, inputs, attrs, outputs),
  }
  return Object.assign(op, helpers) as Builder
}

export type { Dim }
