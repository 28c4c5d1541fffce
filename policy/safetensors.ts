// The safetensors format (Hugging Face): 8-byte little-endian header length, a JSON header mapping tensor
// names to { dtype, shape, data_offsets }, then the raw little-endian tensor bytes.

export type SafetensorsDtype = 'F32' | 'F16' | 'BF16' | 'F64' | 'I64' | 'I32' | 'U8'

const DTYPE_BYTES: Record<SafetensorsDtype, number> = { F32: 4, F16: 2, BF16: 2, F64: 8, I64: 8, I32: 4, U8: 1 }

export interface RawTensor {
  dtype: SafetensorsDtype
  shape: number[]
  /** Little-endian bytes, exactly shape.product × dtype size. */
  data: Uint8Array
}

export class SafetensorsError extends Error {
  override name = 'SafetensorsError'
}

/** A file of named tensors plus the string metadata (`__metadata__`). */
export interface SafetensorsFile {
  tensors: Map<string, RawTensor>
  metadata: Record<string, string>
}

function product(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1)
}

/** Serialises tensors in name order (deterministic bytes), header padded to 8 bytes as the reference does. */
export function encodeSafetensors(tensors: Map<string, RawTensor>, metadata: Record<string, string> = {}): Uint8Array {
  const names = [...tensors.keys()].sort()
  const header: Record<string, unknown> = {}
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata
  let offset = 0
  for (const name of names) {
    const t = tensors.get(name) as RawTensor
    const expected = product(t.shape) * DTYPE_BYTES[t.dtype]
    if (t.data.byteLength !== expected) {
      throw new SafetensorsError(
        `${name}: ${t.data.byteLength} bytes for ${t.dtype}[${t.shape.join(', ')}], expected ${expected}`,
      )
    }
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + expected] }
    offset += expected
  }
  let json = JSON.stringify(header)
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8)
  const headerBytes = Buffer.from(json, 'utf8')
  const out = new Uint8Array(8 + headerBytes.byteLength + offset)
  new DataView(out.buffer).setBigUint64(0, BigInt(headerBytes.byteLength), true)
  out.set(headerBytes, 8)
  let at = 8 + headerBytes.byteLength
  for (const name of names) {
    const t = tensors.get(name) as RawTensor
    out.set(t.data, at)
    at += t.data.byteLength
  }
  return out
}

/** Parses and validates a safetensors file; `source` names it in errors. Tensor data are views, not copies. */
export function decodeSafetensors(bytes: Uint8Array, source = 'safetensors'): SafetensorsFile {
  if (bytes.byteLength < 8) throw new SafetensorsError(`${source}: ${bytes.byteLength} bytes is too short for a header`)
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const headerLength = Number(view.getBigUint64(0, true))
  if (headerLength > bytes.byteLength - 8 || headerLength > 100 * 1024 * 1024) {
    throw new SafetensorsError(`${source}: header length ${headerLength} exceeds the file (${bytes.byteLength} bytes)`)
  }
  let header: Record<string, unknown>
  try {
    header = JSON.parse(Buffer.from(bytes.subarray(8, 8 + headerLength)).toString('utf8'))
  } catch (error) {
    throw new SafetensorsError(`${source}: header is not JSON (${(error as Error).message})`)
  }
  const dataStart = 8 + headerLength
  const dataLength = bytes.byteLength - dataStart
  const tensors = new Map<string, RawTensor>()
  let metadata: Record<string, string> = {}
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') {
      metadata = entry as Record<string, string>
      continue
    }
    const {
      dtype,
      shape,
      data_offsets: offsets,
    } = entry as { dtype: SafetensorsDtype; shape: number[]; data_offsets: [number, number] }
    if (!(dtype in DTYPE_BYTES)) throw new SafetensorsError(`${source}: tensor ${name} has unsupported dtype ${dtype}`)
    if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && d >= 0)) {
      throw new SafetensorsError(`${source}: tensor ${name} has an invalid shape ${JSON.stringify(shape)}`)
    }
    const [begin, end] = offsets ?? []
    const expected = product(shape) * DTYPE_BYTES[dtype]
    if (!Number.isInteger(begin) || !Number.isInteger(end) || (begin as number) < 0 || (end as number) > dataLength) {
      throw new SafetensorsError(
        `${source}: tensor ${name} offsets ${JSON.stringify(offsets)} outside the data (${dataLength} bytes)`,
      )
    }
    if ((end as number) - (begin as number) !== expected) {
      throw new SafetensorsError(
        `${source}: tensor ${name} ${dtype}[${shape.join(', ')}] needs ${expected} bytes, offsets give ${(end as number) - (begin as number)}`,
      )
    }
    tensors.set(name, {
      dtype,
      shape,
      data: bytes.subarray(dataStart + (begin as number), dataStart + (end as number)),
    })
  }
  return { tensors, metadata }
}

/** float32 values of a tensor (converting F16 / BF16 / F64), as a fresh, aligned array. */
export function toFloat32(tensor: RawTensor, name = 'tensor'): Float32Array {
  const n = product(tensor.shape)
  const copy = new Uint8Array(tensor.data) // an aligned copy (Buffer.slice would be a view)
  switch (tensor.dtype) {
    case 'F32':
      return new Float32Array(copy.buffer, 0, n)
    case 'F64':
      return Float32Array.from(new Float64Array(copy.buffer, 0, n))
    case 'BF16': {
      const u16 = new Uint16Array(copy.buffer, 0, n)
      const u32 = new Uint32Array(n)
      for (let i = 0; i < n; i++) u32[i] = (u16[i] as number) << 16
      return new Float32Array(u32.buffer)
    }
    case 'F16': {
      const u16 = new Uint16Array(copy.buffer, 0, n)
      const out = new Float32Array(n)
      for (let i = 0; i < n; i++) out[i] = halfToFloat(u16[i] as number)
      return out
    }
    default:
      throw new SafetensorsError(`${name}: ${tensor.dtype} is not a floating-point dtype`)
  }
}

export function fromFloat32(values: Float32Array, shape: number[]): RawTensor {
  if (values.length !== product(shape))
    throw new SafetensorsError(`${values.length} values for shape [${shape.join(', ')}]`)
  return { dtype: 'F32', shape: [...shape], data: new Uint8Array(values.buffer, values.byteOffset, values.byteLength) }
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1
  const exponent = (h >> 10) & 0x1f
  const fraction = h & 0x3ff
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024)
  if (exponent === 31) return fraction ? Number.NaN : sign * Number.POSITIVE_INFINITY
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024)
}
