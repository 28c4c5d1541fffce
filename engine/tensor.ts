import { type AnyTypedArray, type DType, TYPED_ARRAY, type TypedArrayOf } from './dtype.ts'
import { EngineRuntimeError } from './errors.ts'
import { formatShape } from './shape.ts'

/** A host tensor: what goes into and comes out of a model run. */
export interface TensorData<D extends DType = DType> {
  dtype: D
  dims: readonly number[]
  data: TypedArrayOf[D]
}

export type Feeds = Record<string, TensorData>
export type Fetches = Record<string, TensorData>

/** A tensor over `data` (not copied); its length must match `dims`. */
export function tensor<D extends DType>(
  dtype: D,
  dims: readonly number[],
  data: TypedArrayOf[D] | ArrayLike<number>,
): TensorData<D> {
  const n = dims.reduce((a, b) => a * b, 1)
  let typed: AnyTypedArray
  if (data instanceof TYPED_ARRAY[dtype]) typed = data as AnyTypedArray
  else {
    typed = new TYPED_ARRAY[dtype](n)
    const src = data as ArrayLike<number>
    if (typed instanceof BigInt64Array) for (let i = 0; i < src.length; i++) typed[i] = BigInt(src[i]!)
    else for (let i = 0; i < src.length; i++) typed[i] = src[i]!
    if (src.length !== n)
      throw new EngineRuntimeError(`tensor ${dtype}${formatShape(dims)} needs ${n} values, got ${src.length}`)
  }
  if (typed.length !== n)
    throw new EngineRuntimeError(`tensor ${dtype}${formatShape(dims)} needs ${n} values, got ${typed.length}`)
  return { dtype, dims: [...dims], data: typed as TypedArrayOf[D] }
}

/** Element i as a number (int64 converted). */
export function at(t: TensorData, i: number): number {
  return Number(t.data[i])
}
