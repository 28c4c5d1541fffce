import { ShapeError } from './errors.ts'

/** Element types the engine handles, named as onnxruntime-node's Tensor types. */
export type DType = 'float16' | 'float32' | 'float64' | 'int8' | 'uint8' | 'int32' | 'int64' | 'bool'

/** ONNX TensorProto.DataType codes. */
export const ONNX_DTYPE = {
  float32: 1,
  uint8: 2,
  int8: 3,
  int32: 6,
  int64: 7,
  bool: 9,
  float16: 10,
  float64: 11,
} as const satisfies Record<DType, number>

/** The dtype of an ONNX type code; throws naming the op for codes the engine does not handle. */
export function dtypeOfCode(opType: string, code: number): DType {
  const found = (Object.keys(ONNX_DTYPE) as DType[]).find((d) => ONNX_DTYPE[d] === code)
  if (!found) throw new ShapeError(`${opType}: unsupported element type code ${code}`)
  return found
}

const FLOAT_DTYPES: ReadonlySet<DType> = new Set(['float16', 'float32', 'float64'])

/** Only floating-point values carry gradients. */
export function isFloat(dtype: DType): boolean {
  return FLOAT_DTYPES.has(dtype)
}

/** The typed array that holds each dtype (bool as bytes, float16 as raw 16-bit words). */
export interface TypedArrayOf {
  float16: Uint16Array
  float32: Float32Array
  float64: Float64Array
  int8: Int8Array
  uint8: Uint8Array
  int32: Int32Array
  int64: BigInt64Array
  bool: Uint8Array
}

export type AnyTypedArray = TypedArrayOf[DType]

export const TYPED_ARRAY = {
  float16: Uint16Array,
  float32: Float32Array,
  float64: Float64Array,
  int8: Int8Array,
  uint8: Uint8Array,
  int32: Int32Array,
  int64: BigInt64Array,
  bool: Uint8Array,
} as const satisfies { [K in DType]: { new (n: number): TypedArrayOf[K] } }
