// ggml tensor data → float32, one block decoder per format, written from ggml's block layouts (ggml-common.h).
// Little-endian throughout. Each decoder computes in float64 and rounds once, on the store into the Float32Array:
// every intermediate product and sum here is exact in float64, and the reference (gguf-py's numpy code, one float32
// rounding per operation on operands that are themselves exact in float32) rounds the same exact value once, so the
// results match it bit for bit.

import { GGML_TYPES, ggmlByteLength, ggmlTypeName } from './ggml-types.ts'
import { GgufError } from './gguf-error.ts'
import { HALF_TO_FLOAT as HALF, HALF_TO_FLOAT_BITS as HALF_BITS } from './half.ts'

export { GGML_TYPES, type GgmlType, ggmlByteLength, ggmlTypeName } from './ggml-types.ts'

/** Decodes `blocks` consecutive blocks of `src` into `out` (blocks × block size values). */
type BlockDecoder = (src: Uint8Array, blocks: number, out: Float32Array) => void

function half(src: Uint8Array, at: number): number {
  return HALF[(src[at] as number) | ((src[at + 1] as number) << 8)] as number
}

function u32(src: Uint8Array, at: number): number {
  // an int32 when bit 31 is set; callers shift with >>>, which reads it as unsigned
  return (
    (src[at] as number) |
    ((src[at + 1] as number) << 8) |
    ((src[at + 2] as number) << 16) |
    ((src[at + 3] as number) << 24)
  )
}

function i8(byte: number): number {
  return (byte << 24) >> 24
}

function decodeF32(src: Uint8Array, blocks: number, out: Float32Array): void {
  new Uint8Array(out.buffer, out.byteOffset, blocks * 4).set(src.subarray(0, blocks * 4))
}

function decodeF16(src: Uint8Array, blocks: number, out: Float32Array): void {
  const bits = new Uint32Array(out.buffer, out.byteOffset, blocks)
  for (let i = 0; i < blocks; i++)
    bits[i] = HALF_BITS[(src[2 * i] as number) | ((src[2 * i + 1] as number) << 8)] as number
}

// bfloat16 is the top half of a float32
function decodeBF16(src: Uint8Array, blocks: number, out: Float32Array): void {
  const bits = new Uint32Array(out.buffer, out.byteOffset, blocks)
  for (let i = 0; i < blocks; i++) bits[i] = ((src[2 * i] as number) << 16) | ((src[2 * i + 1] as number) << 24)
}

// block_q8_0 (34 bytes, 32 values): d: f16, qs: int8[32]; x = d·q
function decodeQ8_0(src: Uint8Array, blocks: number, out: Float32Array): void {
  const signed = new Int8Array(src.buffer, src.byteOffset, src.byteLength)
  for (let b = 0, s = 0, o = 0; b < blocks; b++, s += 34, o += 32) {
    const d = half(src, s)
    for (let j = 0; j < 32; j++) out[o + j] = d * (signed[s + 2 + j] as number)
  }
}

// block_q4_0 (18 bytes, 32 values): d: f16, qs: u8[16]; value j is qs[j]'s low nibble, value j+16 its high
// nibble; x = d·(q − 8)
function decodeQ4_0(src: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0, s = 0, o = 0; b < blocks; b++, s += 18, o += 32) {
    const d = half(src, s)
    for (let j = 0; j < 16; j++) {
      const q = src[s + 2 + j] as number
      out[o + j] = d * ((q & 0x0f) - 8)
      out[o + j + 16] = d * ((q >> 4) - 8)
    }
  }
}

// block_q4_1 (20 bytes): d: f16, m: f16, qs: u8[16] as in Q4_0; x = d·q + m
function decodeQ4_1(src: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0, s = 0, o = 0; b < blocks; b++, s += 20, o += 32) {
    const d = half(src, s)
    const m = half(src, s + 2)
    for (let j = 0; j < 16; j++) {
      const q = src[s + 4 + j] as number
      out[o + j] = d * (q & 0x0f) + m
      out[o + j + 16] = d * (q >> 4) + m
    }
  }
}

// block_q5_0 (22 bytes): d: f16, qh: u32 (bit j is value j's fifth bit), qs: u8[16] as in Q4_0; x = d·(q − 16)
function decodeQ5_0(src: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0, s = 0, o = 0; b < blocks; b++, s += 22, o += 32) {
    const d = half(src, s)
    const qh = u32(src, s + 2)
    for (let j = 0; j < 16; j++) {
      const q = src[s + 6 + j] as number
      out[o + j] = d * (((q & 0x0f) | (((qh >>> j) & 1) << 4)) - 16)
      out[o + j + 16] = d * (((q >> 4) | (((qh >>> (j + 16)) & 1) << 4)) - 16)
    }
  }
}

// block_q5_1 (24 bytes): d: f16, m: f16, qh: u32, qs: u8[16] as in Q5_0; x = d·q + m
function decodeQ5_1(src: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0, s = 0, o = 0; b < blocks; b++, s += 24, o += 32) {
    const d = half(src, s)
    const m = half(src, s + 2)
    const qh = u32(src, s + 4)
    for (let j = 0; j < 16; j++) {
      const q = src[s + 8 + j] as number
      out[o + j] = d * ((q & 0x0f) | (((qh >>> j) & 1) << 4)) + m
      out[o + j + 16] = d * ((q >> 4) | (((qh >>> (j + 16)) & 1) << 4)) + m
    }
  }
}

// The 12 scale bytes of Q4_K/Q5_K hold eight 6-bit (scale, min) pairs, one per 32-value sub-block. Sub-blocks 0–3
// use the low 6 bits of bytes 0–3 (scales) and 4–7 (mins); sub-blocks 4–7 take their low 4 bits from the nibbles
// of bytes 8–11 (scale low, min high) and their top 2 bits from the spare top bits of bytes 0–3 and 4–7.
function kScale(src: Uint8Array, at: number, j: number): number {
  if (j < 4) return (src[at + j] as number) & 0x3f
  return ((src[at + j + 4] as number) & 0x0f) | (((src[at + j - 4] as number) >> 6) << 4)
}

function kMin(src: Uint8Array, at: number, j: number): number {
  if (j < 4) return (src[at + j + 4] as number) & 0x3f
  return ((src[at + j + 4] as number) >> 4) | (((src[at + j] as number) >> 6) << 4)
}

// block_q4_K (144 bytes, 256 values in 8 sub-blocks of 32): d: f16, dmin: f16, scales: u8[12], qs: u8[128].
// qs byte l of 32-byte group g holds value l of sub-block 2g (low nibble) and of 2g + 1 (high nibble).
// x = d·scale·q − dmin·min
function decodeQ4_K(src: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0, s = 0, o = 0; b < blocks; b++, s += 144, o += 256) {
    const d = half(src, s)
    const dmin = half(src, s + 2)
    for (let g = 0; g < 4; g++) {
      const lo = 2 * g
      const dLo = d * kScale(src, s + 4, lo)
      const mLo = dmin * kMin(src, s + 4, lo)
      const dHi = d * kScale(src, s + 4, lo + 1)
      const mHi = dmin * kMin(src, s + 4, lo + 1)
      const qs = s + 16 + 32 * g
      const at = o + 64 * g
      for (let l = 0; l < 32; l++) {
        const q = src[qs + l] as number
        out[at + l] = dLo * (q & 0x0f) - mLo
        out[at + 32 + l] = dHi * (q >> 4) - mHi
      }
    }
  }
}

// block_q5_K (176 bytes): d: f16, dmin: f16, scales: u8[12] as in Q4_K, qh: u8[32], qs: u8[128] as in Q4_K.
// Bit j of qh[l] is the fifth bit of value l of sub-block j. x = d·scale·q − dmin·min
function decodeQ5_K(src: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0, s = 0, o = 0; b < blocks; b++, s += 176, o += 256) {
    const d = half(src, s)
    const dmin = half(src, s + 2)
    const qh = s + 16
    for (let g = 0; g < 4; g++) {
      const lo = 2 * g
      const dLo = d * kScale(src, s + 4, lo)
      const mLo = dmin * kMin(src, s + 4, lo)
      const dHi = d * kScale(src, s + 4, lo + 1)
      const mHi = dmin * kMin(src, s + 4, lo + 1)
      const qs = s + 48 + 32 * g
      const at = o + 64 * g
      for (let l = 0; l < 32; l++) {
        const q = src[qs + l] as number
        const h = src[qh + l] as number
        out[at + l] = dLo * ((q & 0x0f) | (((h >> lo) & 1) << 4)) - mLo
        out[at + 32 + l] = dHi * ((q >> 4) | (((h >> (lo + 1)) & 1) << 4)) - mHi
      }
    }
  }
}

// block_q6_K (210 bytes, 256 values in 16 sub-blocks of 16): ql: u8[128], qh: u8[64], scales: int8[16], d: f16
// (last). Each half of 128 values uses 64 ql bytes and 32 qh bytes; value 32k + l of a half (k = 0…3, l = 0…31)
// takes its low 4 bits from ql byte (k & 1)·32 + l (low nibble for k < 2, high for k ≥ 2) and its top 2 bits
// from bits 2k, 2k + 1 of qh byte l. x = d·scale·(q − 32)
function decodeQ6_K(src: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0, s = 0, o = 0; b < blocks; b++, s += 210, o += 256) {
    const d = half(src, s + 208)
    for (let h = 0; h < 2; h++) {
      const ql = s + 64 * h
      const qh = s + 128 + 32 * h
      const sc = s + 192 + 8 * h
      const at = o + 128 * h
      for (let l = 0; l < 32; l++) {
        const a = src[ql + l] as number
        const c = src[ql + 32 + l] as number
        const hb = src[qh + l] as number
        const i = l >> 4
        out[at + l] = d * i8(src[sc + i] as number) * (((a & 0x0f) | ((hb & 3) << 4)) - 32)
        out[at + 32 + l] = d * i8(src[sc + 2 + i] as number) * (((c & 0x0f) | (((hb >> 2) & 3) << 4)) - 32)
        out[at + 64 + l] = d * i8(src[sc + 4 + i] as number) * (((a >> 4) | (((hb >> 4) & 3) << 4)) - 32)
        out[at + 96 + l] = d * i8(src[sc + 6 + i] as number) * (((c >> 4) | ((hb >> 6) << 4)) - 32)
      }
    }
  }
}

const DECODERS = {
  F32: decodeF32,
  F16: decodeF16,
  BF16: decodeBF16,
  Q8_0: decodeQ8_0,
  Q4_0: decodeQ4_0,
  Q4_1: decodeQ4_1,
  Q5_0: decodeQ5_0,
  Q5_1: decodeQ5_1,
  Q4_K: decodeQ4_K,
  Q5_K: decodeQ5_K,
  Q6_K: decodeQ6_K,
} as const satisfies Record<string, BlockDecoder>

export type DequantizableType = keyof typeof DECODERS

/** The ggml type names `dequantize` accepts. */
export const DEQUANTIZABLE_TYPES = Object.keys(DECODERS) as readonly DequantizableType[]

function decoderFor(type: number): BlockDecoder | undefined {
  const name = GGML_TYPES.get(type)?.name
  return name !== undefined && Object.hasOwn(DECODERS, name) ? DECODERS[name as DequantizableType] : undefined
}

/** Whether `dequantize` reads ggml type id `type`. */
export function canDequantize(type: number): boolean {
  return decoderFor(type) !== undefined
}

/** The error for data of a type `dequantize` refuses; `what` is e.g. `tensor blk.0.attn_q.weight`. */
export function unsupportedTypeError(what: string, type: number): GgufError {
  return new GgufError(
    `${what} has type ${ggmlTypeName(type)}, which seedflow cannot dequantize (supported: ${DEQUANTIZABLE_TYPES.join(', ')})`,
  )
}

/**
 * Dequantizes `count` values of ggml type `type` from `bytes`, which must hold exactly their blocks
 * (count / block size × bytes per block). `name`, when given, names the tensor in errors.
 * Throws a GgufError for a type other than DEQUANTIZABLE_TYPES, a count that is not whole blocks, or a byte
 * length that does not match.
 */
export function dequantize(type: number, bytes: Uint8Array, count: number, name?: string): Float32Array {
  const what = name === undefined ? 'data' : `tensor ${name}`
  const decode = decoderFor(type)
  if (!decode) throw unsupportedTypeError(what, type)
  const info = GGML_TYPES.get(type) as { name: string; blockSize: number }
  const expected = ggmlByteLength(type, count, what)
  if (bytes.byteLength !== expected) {
    throw new GgufError(
      `${what}: ${count} ${info.name} values take ${expected} bytes, got ${bytes.byteLength}` +
        (bytes.byteLength < expected ? ' (truncated)' : ''),
    )
  }
  const out = new Float32Array(count)
  decode(bytes, count / info.blockSize, out)
  return out
}
