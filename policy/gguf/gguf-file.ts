// A GGUF file (llama.cpp's model format): the header, metadata and tensor infos are parsed by @huggingface/gguf;
// tensor data is read here, one tensor at a time at its offset through a file handle, and dequantized to float32.

import { type FileHandle, open } from 'node:fs/promises'
import { gguf, type MetadataValue } from '@huggingface/gguf'
import { canDequantize, dequantize, unsupportedTypeError } from './dequantize.ts'
import { GGML_TYPES, ggmlByteLength } from './ggml-types.ts'
import { GgufError } from './gguf-error.ts'

/** One tensor's header entry, with its place in the file. */
export interface GgufTensorInfo {
  name: string
  /** ggml order: shape[0] (ne[0]) is the fastest-varying dimension, the reverse of PyTorch's. */
  shape: number[]
  /** ggml type id (GGML_TYPES). */
  type: number
  /** ggml type name, e.g. `Q4_K`. */
  typeName: string
  elements: number
  /** Absolute offset of the tensor's first byte in the file. */
  byteOffset: number
  byteLength: number
}

export interface GgufFile {
  path: string
  /** GGUF format version (2 or 3). */
  version: number
  /** The key-value metadata (`general.architecture`, `tokenizer.ggml.tokens`, …); integers that fit are numbers. */
  metadata: Record<string, unknown>
  tensors: GgufTensorInfo[]
  /** Absolute offset of the tensor data section. */
  dataOffset: number
  /** The tensor's values, dequantized; throws a GgufError for an unknown name or an unsupported type. */
  read(name: string): Promise<Float32Array>
  close(): Promise<void>
}

/** The GGUF versions seedflow reads. v1 (before October 2023) had 32-bit counts; llama.cpp no longer reads it. */
const VERSIONS = [2, 3]
const MAGIC = 'GGUF'
/** Magic, version, tensor count and key-value count. */
const FIXED_HEADER_BYTES = 24
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER)

/**
 * Throws a GgufError naming the first tensor whose type seedflow cannot dequantize (and how many others there are),
 * so that an importer can refuse a file before reading any tensor data.
 */
export function checkSupported(tensors: readonly GgufTensorInfo[]): void {
  const bad = tensors.filter((t) => !canDequantize(t.type))
  const first = bad[0]
  if (!first) return
  const error = unsupportedTypeError(`tensor ${first.name}`, first.type)
  if (bad.length > 1) {
    const types = [...new Set(bad.map((t) => t.typeName))].join(', ')
    error.message += `; ${bad.length - 1} more tensors have unsupported types (${types})`
  }
  throw error
}

/** Opens and checks a GGUF file: every tensor must lie inside it. Tensor data is read on demand by `read`. */
export async function openGguf(path: string): Promise<GgufFile> {
  let handle: FileHandle
  try {
    handle = await open(path, 'r')
  } catch (e) {
    throw new GgufError(`${path}: cannot open: ${(e as Error).message}`, { cause: e })
  }
  try {
    return await readHeader(path, handle)
  } catch (e) {
    await handle.close()
    throw e
  }
}

async function readHeader(path: string, handle: FileHandle): Promise<GgufFile> {
  const size = (await handle.stat()).size
  const version = await checkFixedHeader(path, handle, size)
  let header: Awaited<ReturnType<typeof gguf>>
  try {
    header = await gguf(path, { allowLocalFile: true })
  } catch (e) {
    throw new GgufError(`${path}: cannot parse the GGUF header: ${(e as Error).message}`, { cause: e })
  }
  // The parser reads the header in zero-padded chunks, so a file cut short inside its header parses as zeros.
  if (header.tensorInfoByteRange[1] > size) {
    throw new GgufError(`${path} is truncated: the file ends (${size} bytes) inside its header`)
  }
  const dataOffset = Number(header.tensorDataOffset)

  const tensors = header.tensorInfos.map((t): GgufTensorInfo => {
    const shape = t.shape.map((n) => safeNumber(n, `${path}: tensor ${t.name} shape`))
    const elements = shape.reduce((a, b) => a * b, 1)
    const info = GGML_TYPES.get(t.dtype)
    if (!info) {
      throw new GgufError(
        `${path}: tensor ${t.name} has ggml type id ${t.dtype}, which is not a known ggml type (a newer ggml's file?)`,
      )
    }
    // ggml quantizes row by row: a row (ne[0] values) is whole blocks
    if ((shape[0] ?? 1) % info.blockSize !== 0) {
      throw new GgufError(
        `${path}: tensor ${t.name} (${info.name}[${shape.join(', ')}]) has rows of ${shape[0]} values, ` +
          `not a whole number of ${info.blockSize}-value blocks`,
      )
    }
    const byteOffset = dataOffset + safeNumber(t.offset, `${path}: tensor ${t.name} offset`)
    const byteLength = ggmlByteLength(t.dtype, elements, `${path}: tensor ${t.name}`)
    if (byteOffset + byteLength > size) {
      throw new GgufError(
        `${path} is truncated: tensor ${t.name} (${info.name}[${shape.join(', ')}]) needs bytes ` +
          `[${byteOffset}, ${byteOffset + byteLength}), the file has ${size}`,
      )
    }
    return { name: t.name, shape, type: t.dtype, typeName: info.name, elements, byteOffset, byteLength }
  })
  const byName = new Map<string, GgufTensorInfo>()
  for (const t of tensors) {
    if (byName.has(t.name)) throw new GgufError(`${path}: tensor ${t.name} appears twice`)
    byName.set(t.name, t)
  }

  const metadata: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(header.metadata)) {
    // the parser adds the fixed header's fields to the key-value pairs; they are not metadata keys
    if (key === 'version' || key === 'tensor_count' || key === 'kv_count') continue
    metadata[key] = plainValue(value as MetadataValue)
  }

  let closed = false
  return {
    path,
    version,
    metadata,
    tensors,
    dataOffset,
    async read(name: string): Promise<Float32Array> {
      const tensor = byName.get(name)
      if (!tensor) throw new GgufError(`${path} has no tensor named ${name}`)
      if (!canDequantize(tensor.type)) throw unsupportedTypeError(`tensor ${name}`, tensor.type)
      if (closed) throw new GgufError(`${path} is closed: cannot read tensor ${name}`)
      const bytes = await readExactly(path, handle, tensor)
      return dequantize(tensor.type, bytes, tensor.elements, name)
    },
    async close(): Promise<void> {
      if (closed) return
      closed = true
      await handle.close()
    },
  }
}

async function checkFixedHeader(path: string, handle: FileHandle, size: number): Promise<number> {
  const head = Buffer.alloc(FIXED_HEADER_BYTES)
  await handle.read(head, 0, FIXED_HEADER_BYTES, 0)
  if (size === 0) throw new GgufError(`${path} is not a GGUF file: it is empty`)
  if (size < 4 || head.toString('latin1', 0, 4) !== MAGIC) {
    const start = [...head.subarray(0, Math.min(size, 4))].map((b) => b.toString(16).padStart(2, '0')).join(' ')
    throw new GgufError(`${path} is not a GGUF file: it starts with [${start}], not "GGUF"`)
  }
  if (size < FIXED_HEADER_BYTES) {
    throw new GgufError(`${path} is truncated: ${size} bytes, shorter than GGUF's ${FIXED_HEADER_BYTES}-byte header`)
  }
  const version = head.readUInt32LE(4)
  if (VERSIONS.includes(version)) return version
  if (VERSIONS.includes(head.readUInt32BE(4))) {
    throw new GgufError(`${path} is a big-endian GGUF file, which seedflow cannot read (convert it little-endian)`)
  }
  throw new GgufError(`${path} has GGUF version ${version}; seedflow reads versions ${VERSIONS.join(' and ')}`)
}

async function readExactly(path: string, handle: FileHandle, tensor: GgufTensorInfo): Promise<Uint8Array> {
  const bytes = new Uint8Array(tensor.byteLength)
  let done = 0
  while (done < bytes.byteLength) {
    const { bytesRead } = await handle.read(bytes, done, bytes.byteLength - done, tensor.byteOffset + done)
    if (bytesRead === 0) {
      // checked at open, so the file shrank since
      throw new GgufError(
        `${path} is truncated: tensor ${tensor.name} ends at byte ${tensor.byteOffset + tensor.byteLength}, ` +
          `reading stopped at ${tensor.byteOffset + done}`,
      )
    }
    done += bytesRead
  }
  return bytes
}

function safeNumber(value: bigint, what: string): number {
  if (value > MAX_SAFE) throw new GgufError(`${what}: ${value} is too large`)
  return Number(value)
}

/** Metadata as plain values: 64-bit integers become numbers where they are exactly representable. */
function plainValue(value: MetadataValue): unknown {
  if (Array.isArray(value)) return value.map((v) => plainValue(v as MetadataValue))
  if (typeof value === 'bigint' && value >= -MAX_SAFE && value <= MAX_SAFE) return Number(value)
  return value
}
