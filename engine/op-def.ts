import type { Builder } from './builder.ts'
import type { DType } from './dtype.ts'
import { GraphError } from './errors.ts'
import type { Attr, Attrs, ConstTensor, Graph, Node, Value, ValueInfo } from './ir.ts'
import type { Shape } from './shape.ts'

/** Declares that an op passes no gradient to any input (its outputs are not functions of float inputs). */
export const NONDIFFERENTIABLE = 'nondifferentiable' as const

/** What an op's `build` uses to emit its node; constants only, so op definitions never depend on each other. */
export interface Emit {
  /** Emits one node of this op with shape inference; returns its outputs. */
  (inputs: readonly (Value | null)[], attrs?: Attrs): Value[]
  /** Emits one node of this op and returns its only output. */
  one(inputs: readonly (Value | null)[], attrs?: Attrs): Value
  /** A constant (shared within the graph when equal). */
  constant(tensor: ConstTensor): Value
  /** A 1-D int64 constant. */
  ints(values: readonly number[]): Value
  /** `x` itself, or a scalar constant of `like`'s dtype. */
  valueOf(x: Value | number, like: Value | number): Value
  readonly graph: Graph
}

/** Typed reads of a node's attributes, with ONNX defaults. */
export interface AttrReader {
  int(name: string, fallback?: number): number
  float(name: string, fallback?: number): number
  ints(name: string, fallback?: readonly number[]): readonly number[]
  string(name: string, fallback?: string): string
  tensor(name: string): ConstTensor
  has(name: string): boolean
}

/** Shape inference: the dtype and shape of every output, from the inputs and attributes. */
export type InferFn = (inputs: readonly (Value | null)[], attrs: AttrReader) => ValueInfo[]

export interface VjpContext {
  readonly node: Node
  /** The node's inputs (null where an optional input was omitted). */
  readonly x: readonly (Value | null)[]
  /** The node's outputs, reusable in the rule (e.g. `Exp`: dx = dy·y). */
  readonly y: readonly Value[]
  /** Gradient of the loss with respect to output 0. */
  readonly dy: Value
  /** Gradients of every output (zeros where an output does not reach the loss). */
  readonly dys: readonly Value[]
  readonly attrs: AttrReader
  /** Whether each input needs a gradient; a rule may skip work for the others (return null). */
  readonly needs: readonly boolean[]
}

/** A vector-Jacobian product: one entry per node input, null where the input gets no gradient. */
export type VjpFn = (op: Builder, ctx: VjpContext) => Grads
export type Grads = readonly (Value | null)[]

// biome-ignore lint/suspicious/noExplicitAny: the builder method's arguments are each op's own
export interface OpDef<A extends any[] = any[], R = unknown> {
  readonly opType: string
  readonly domain: string
  readonly build: (emit: Emit, ...args: A) => R
  readonly infer: InferFn
  readonly vjp: VjpFn | typeof NONDIFFERENTIABLE
}

// biome-ignore lint/suspicious/noExplicitAny: see OpDef
export function defineOp<A extends any[], R>(def: {
  opType: string
  domain?: string
  build: (emit: Emit, ...args: A) => R
  infer: InferFn
  vjp: VjpFn | typeof NONDIFFERENTIABLE
}): OpDef<A, R> {
  return { ...def, domain: def.domain ?? '' }
}

export function attrReader(opType: string, attrs: Attrs): AttrReader {
  const get = <T extends Attr['type']>(name: string, type: T): Extract<Attr, { type: T }> | undefined => {
    const a = attrs[name]
    if (a === undefined) return undefined
    if (a.type !== type) throw new GraphError(`${opType}: attribute ${name} is ${a.type}, expected ${type}`)
    return a as Extract<Attr, { type: T }>
  }
  const missing = (name: string): never => {
    throw new GraphError(`${opType}: attribute ${name} is required`)
  }
  return {
    int: (name, fallback) => get(name, 'int')?.value ?? fallback ?? missing(name),
    float: (name, fallback) => get(name, 'float')?.value ?? fallback ?? missing(name),
    ints: (name, fallback) => get(name, 'ints')?.value ?? fallback ?? missing(name),
    string: (name, fallback) => get(name, 'string')?.value ?? fallback ?? missing(name),
    tensor: (name) => get(name, 'tensor')?.value ?? missing(name),
    has: (name) => attrs[name] !== undefined,
  }
}

/** Output info with the same dtype and shape as `v`. */
export function like(v: Value, shape: Shape = v.shape, dtype: DType = v.dtype): ValueInfo {
  return { dtype, shape }
}

/** The input at `i`, which the op requires. */
export function req(opType: string, inputs: readonly (Value | null)[], i: number): Value {
  const v = inputs[i]
  if (!v) throw new GraphError(`${opType}: input ${i} is required`)
  return v
}
