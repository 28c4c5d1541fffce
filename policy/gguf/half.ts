// IEEE half → single precision by table: the float32 bit pattern of every one of the 65536 half bit patterns
// (256 KiB). Bit patterns, not numbers, so that a copy keeps NaN payloads exactly (numpy keeps them too, and a
// float read into a JS number may come back quieted).

function halfBitsToFloatBits(h: number): number {
  const sign = (h & 0x8000) << 16
  const exponent = (h >> 10) & 0x1f
  let mantissa = h & 0x3ff
  if (exponent === 31) return (sign | 0x7f800000 | (mantissa << 13)) >>> 0 // inf, or NaN with its payload
  if (exponent !== 0) return (sign | ((exponent - 15 + 127) << 23) | (mantissa << 13)) >>> 0
  if (mantissa === 0) return sign >>> 0 // ±0
  // subnormal half (mantissa · 2⁻²⁴): a normal float32; shift the leading 1 up to the implicit-bit position
  let e = -14
  while ((mantissa & 0x400) === 0) {
    mantissa <<= 1
    e--
  }
  return (sign | ((e + 127) << 23) | ((mantissa & 0x3ff) << 13)) >>> 0
}

/** Float32 bit pattern of each half bit pattern. */
export const HALF_TO_FLOAT_BITS: Uint32Array = Uint32Array.from({ length: 65536 }, (_, h) => halfBitsToFloatBits(h))

/** The same table read as float32 values, for arithmetic with a block's scales. */
export const HALF_TO_FLOAT: Float32Array = new Float32Array(HALF_TO_FLOAT_BITS.buffer)
