import { type AnyTypedArray, type DType, TYPED_ARRAY } from './dtype.ts'
import { GraphError } from './errors.ts'
import { type Dim, formatShape, type Shape } from './shape.ts'

/** A small constant tensor: node attribute payloads and `Constant` values. */
export interface ConstTensor {
  dtype: DType
  dims: readonly number[]
  data: AnyTypedArray
}

/** ONNX attributes, typed as ONNX types them (an int and a float attribute are different things). */
export type Attr =
  | { type: 'int'; value: number }
  | { type: 'float'; value: number }
  | { type: 'ints'; value: readonly number[] }
  | { type: 'floats'; value: readonly number[] }
  | { type: 'string'; value: string }
  | { type: 'tensor'; value: ConstTensor }

export type Attrs = Readonly<Record<string, Attr>>

export const attr = {
  int: (value: number): Attr => ({ type: 'int', value }),
  float: (value: number): Attr => ({ type: 'float', value }),
  ints: (value: readonly number[]): Attr => ({ type: 'ints', value: [...value] }),
  floats: (value: readonly number[]): Attr => ({ type: 'floats', value: [...value] }),
  string: (value: string): Attr => ({ type: 'string', value }),
  tensor: (value: ConstTensor): Attr => ({ type: 'tensor', value }),
}

/** One tensor in the graph: a graph input or one output of one node. */
export interface Value {
  readonly id: number
  /** Unique in its graph; gradient values are named after their primal (`x` → `x_grad`). */
  name: string
  readonly dtype: DType
  readonly shape: Shape
  readonly producer: Node | null
  /** Elements of a small 1-D or scalar integer value when known at build time (constants, `Shape` outputs). */
  readonly known?: readonly Dim[]
}

export interface Node {
  readonly id: number
  /** Key of the op in `OPS`, or null for a forward-only custom node that has no entry there. */
  readonly kind: string | null
  readonly opType: string
  readonly domain: string
  readonly name: string
  /** null marks an omitted optional input. */
  readonly inputs: readonly (Value | null)[]
  readonly outputs: readonly Value[]
  readonly attrs: Attrs
}

/**
 * A span of nodes built by `Builder.block` (a decoder layer, a chunk of logits). The backward pass enters
 * the blocks one after another: a block's backward starts only once the block after it has finished its
 * gradients, so the runtime cannot leave them (and the values they read) for the end. With `recompute`, the
 * backward pass rebuilds the block's values from those inputs instead of keeping them from the forward pass
 * (activation checkpointing); values the block reads besides them (weights, masks) are shared.
 */
export interface Block {
  readonly name: string
  readonly nodes: ReadonlySet<number>
  readonly recompute: readonly Value[] | null
}

/** What shape inference says about one output. */
export interface ValueInfo {
  dtype: DType
  shape: Shape
  known?: readonly Dim[]
}

/**
 * A graph under construction: append-only, so `nodes` is always in topological order.
 * Weights are graph inputs; only small constants live inside (as `Constant` nodes).
 */
export class Graph {
  readonly inputs: Value[] = []
  readonly outputs: Value[] = []
  readonly nodes: Node[] = []
  /** Node spans the backward pass takes one at a time, optionally recomputing them (`Builder.block`). */
  readonly blocks: Block[] = []
  #names = new Set<string>()
  #values = new WeakSet<Value>()
  #nextId = 0
  #scope: string[] = []
  #counters = new Map<string, number>()

  constructor(readonly name = 'seedflow') {}

  /** Declares a graph input (weights, tokens, masks…). */
  input(name: string, dtype: DType, shape: Shape): Value {
    this.#claim(name)
    const value: Value = { id: this.#nextId++, name, dtype, shape: [...shape], producer: null }
    this.inputs.push(value)
    this.#values.add(value)
    return value
  }

  /** Marks `value` as a graph output, under `name` when given (an Identity is added if it must be renamed). */
  output(value: Value, name?: string): Value {
    if (name !== undefined && name !== value.name) {
      if (value.producer && !this.outputs.includes(value)) this.rename(value, name)
      else
        value = this.addNode(null, 'Identity', '', [value], {}, [{ dtype: value.dtype, shape: value.shape }], name)[0]!
    } else if (!value.producer || this.outputs.includes(value)) {
      throw new GraphError(`output ${value.name}: a graph input or an existing output needs a new name to be an output`)
    }
    this.outputs.push(value)
    return value
  }

  /** Renames a node output; the name must be free. */
  rename(value: Value, name: string): Value {
    if (value.name === name) return value
    if (!value.producer) throw new GraphError(`rename ${value.name} → ${name}: graph inputs keep their names`)
    this.#claim(name) // the old name stays taken: it is also the producing node's name
    value.name = name
    return value
  }

  /** A name not yet used in this graph: `base`, else `base_1`, `base_2`… */
  freeName(base: string): string {
    if (!this.#names.has(base)) return base
    for (let i = 1; ; i++) if (!this.#names.has(`${base}_${i}`)) return `${base}_${i}`
  }

  hasName(name: string): boolean {
    return this.#names.has(name)
  }

  /** Runs `fn` with names of new nodes prefixed by `prefix/`. */
  scoped<R>(prefix: string, fn: () => R): R {
    this.#scope.push(prefix)
    try {
      return fn()
    } finally {
      this.#scope.pop()
    }
  }

  /** Appends one node; its outputs are named `scope/OpType_n` (`:i` suffix for further outputs) unless named. */
  addNode(
    kind: string | null,
    opType: string,
    domain: string,
    inputs: readonly (Value | null)[],
    attrs: Attrs,
    outputs: readonly ValueInfo[],
    name?: string,
  ): Value[] {
    for (const input of inputs) {
      if (input && !this.#owns(input)) throw new GraphError(`${opType}: input ${input.name} belongs to another graph`)
    }
    const nodeName = name ?? this.#autoName(opType)
    this.#claim(nodeName)
    const values: Value[] = []
    const node: Node = {
      id: this.#nextId++,
      kind,
      opType,
      domain,
      name: nodeName,
      inputs: [...inputs],
      outputs: values,
      attrs,
    }
    outputs.forEach((info, i) => {
      const valueName = i === 0 ? nodeName : this.freeName(`${nodeName}:${i}`)
      if (i > 0) this.#claim(valueName)
      const value: Value = {
        id: this.#nextId++,
        name: valueName,
        dtype: info.dtype,
        shape: [...info.shape],
        producer: node,
      }
      values.push(info.known ? { ...value, known: info.known } : value)
    })
    for (const value of values) this.#values.add(value)
    this.nodes.push(node)
    return values
  }

  describe(value: Value): string {
    return `${value.name}: ${value.dtype}${formatShape(value.shape)}`
  }

  #owns(value: Value): boolean {
    return this.#values.has(value)
  }

  #autoName(opType: string): string {
    const prefix = this.#scope.length > 0 ? `${this.#scope.join('/')}/` : ''
    const key = `${prefix}${opType}`
    let n = this.#counters.get(key) ?? 0
    while (this.#names.has(`${key}_${n}`)) n++
    this.#counters.set(key, n + 1)
    return `${key}_${n}`
  }

  #claim(name: string): void {
    if (this.#names.has(name))
      throw new GraphError(`name ${JSON.stringify(name)} is already used in graph ${this.name}`)
    this.#names.add(name)
  }
}

/** A constant tensor from plain numbers (bigint for int64 is accepted too). */
export function constTensor(dtype: DType, dims: readonly number[], values: ArrayLike<number | bigint>): ConstTensor {
  const n = dims.reduce((a, b) => a * b, 1)
  if (values.length !== n)
    throw new GraphError(`constant ${dtype}${formatShape(dims)} needs ${n} values, got ${values.length}`)
  const data = new TYPED_ARRAY[dtype](n)
  for (let i = 0; i < n; i++) {
    const v = values[i]!
    if (data instanceof BigInt64Array) data[i] = typeof v === 'bigint' ? v : BigInt(Math.trunc(v))
    else data[i] = Number(v)
  }
  return { dtype, dims: [...dims], data }
}
