// ggml's tensor types as GGUF files number them (ggml.h `enum ggml_type`). Ids 4, 5, 31–33 and 36–38 belonged to
// layouts ggml has since removed (Q4_2, Q4_3, the interleaved Q4_0_4_4 … IQ4_NL_8_8); no current file uses them.

import { GgufError } from './gguf-error.ts'

export interface GgmlType {
  id: number
  name: string
  /** Elements per block; a tensor's element count must be a multiple of it. */
  blockSize: number
  /** Bytes per block. */
  typeSize: number
}

const QK_K = 256 // elements in a K-quant (and most IQ) super-block

const TYPES: readonly GgmlType[] = [
  { id: 0, name: 'F32', blockSize: 1, typeSize: 4 },
  { id: 1, name: 'F16', blockSize: 1, typeSize: 2 },
  { id: 2, name: 'Q4_0', blockSize: 32, typeSize: 2 + 16 },
  { id: 3, name: 'Q4_1', blockSize: 32, typeSize: 2 + 2 + 16 },
  { id: 6, name: 'Q5_0', blockSize: 32, typeSize: 2 + 4 + 16 },
  { id: 7, name: 'Q5_1', blockSize: 32, typeSize: 2 + 2 + 4 + 16 },
  { id: 8, name: 'Q8_0', blockSize: 32, typeSize: 2 + 32 },
  { id: 9, name: 'Q8_1', blockSize: 32, typeSize: 4 + 4 + 32 },
  { id: 10, name: 'Q2_K', blockSize: QK_K, typeSize: 2 + 2 + QK_K / 16 + QK_K / 4 },
  { id: 11, name: 'Q3_K', blockSize: QK_K, typeSize: 2 + QK_K / 4 + QK_K / 8 + 12 },
  { id: 12, name: 'Q4_K', blockSize: QK_K, typeSize: 2 + 2 + 12 + QK_K / 2 },
  { id: 13, name: 'Q5_K', blockSize: QK_K, typeSize: 2 + 2 + 12 + QK_K / 8 + QK_K / 2 },
  { id: 14, name: 'Q6_K', blockSize: QK_K, typeSize: QK_K / 2 + QK_K / 4 + QK_K / 16 + 2 },
  { id: 15, name: 'Q8_K', blockSize: QK_K, typeSize: 4 + QK_K + QK_K / 8 },
  { id: 16, name: 'IQ2_XXS', blockSize: QK_K, typeSize: 2 + QK_K / 4 },
  { id: 17, name: 'IQ2_XS', blockSize: QK_K, typeSize: 2 + QK_K / 4 + QK_K / 32 },
  { id: 18, name: 'IQ3_XXS', blockSize: QK_K, typeSize: 2 + QK_K / 4 + QK_K / 8 },
  { id: 19, name: 'IQ1_S', blockSize: QK_K, typeSize: 2 + QK_K / 8 + QK_K / 16 },
  { id: 20, name: 'IQ4_NL', blockSize: 32, typeSize: 2 + 16 },
  { id: 21, name: 'IQ3_S', blockSize: QK_K, typeSize: 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4 },
  { id: 22, name: 'IQ2_S', blockSize: QK_K, typeSize: 2 + QK_K / 4 + QK_K / 16 },
  { id: 23, name: 'IQ4_XS', blockSize: QK_K, typeSize: 2 + 2 + QK_K / 2 + QK_K / 64 },
  { id: 24, name: 'I8', blockSize: 1, typeSize: 1 },
  { id: 25, name: 'I16', blockSize: 1, typeSize: 2 },
  { id: 26, name: 'I32', blockSize: 1, typeSize: 4 },
  { id: 27, name: 'I64', blockSize: 1, typeSize: 8 },
  { id: 28, name: 'F64', blockSize: 1, typeSize: 8 },
  { id: 29, name: 'IQ1_M', blockSize: QK_K, typeSize: QK_K / 8 + QK_K / 16 + QK_K / 32 },
  { id: 30, name: 'BF16', blockSize: 1, typeSize: 2 },
  { id: 34, name: 'TQ1_0', blockSize: QK_K, typeSize: 2 + 4 * 13 },
  { id: 35, name: 'TQ2_0', blockSize: QK_K, typeSize: 2 + 64 },
  { id: 39, name: 'MXFP4', blockSize: 32, typeSize: 1 + 16 },
  { id: 40, name: 'NVFP4', blockSize: 64, typeSize: 4 + 32 },
  { id: 41, name: 'Q1_0', blockSize: 128, typeSize: 2 + 16 },
]

/** Every ggml type seedflow knows the layout of, by id (only some can be dequantized: see dequantize.ts). */
export const GGML_TYPES: ReadonlyMap<number, GgmlType> = new Map(TYPES.map((t) => [t.id, t]))

/** The ggml name of a type id (`Q4_K`), or `unknown ggml type 99` for an id this table lacks. */
export function ggmlTypeName(type: number): string {
  return GGML_TYPES.get(type)?.name ?? `unknown ggml type ${type}`
}

/**
 * The bytes `elements` values of `type` occupy. Throws a GgufError naming `what` when the type is unknown or the
 * count is not a whole number of blocks (ggml requires each row, ne[0], to be whole blocks).
 */
export function ggmlByteLength(type: number, elements: number, what = 'data'): number {
  const info = GGML_TYPES.get(type)
  if (!info) throw new GgufError(`${what} has ggml type id ${type}, which is not a known ggml type`)
  if (!Number.isSafeInteger(elements) || elements < 0 || elements % info.blockSize !== 0) {
    throw new GgufError(
      `${what}: ${elements} elements of ${info.name} is not a whole number of ${info.blockSize}-element blocks`,
    )
  }
  return (elements / info.blockSize) * info.typeSize
}
