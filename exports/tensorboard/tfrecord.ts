// TFRecord framing, the container of TensorBoard event files. Each record, little-endian:
//
//   bytes   field
//   8       u64 data length n
//   4       u32 masked CRC-32C of those 8 length bytes
//   n       data
//   4       u32 masked CRC-32C of the data
//
// mask(crc) = rotr(crc, 15) + 0xa282ead8 (mod 2^32): TensorFlow masks stored CRCs because the CRC of a string
// that itself embeds CRCs is weak. A file is records back to back, nothing before, between or after them.
import { crc32c } from './crc32c.ts'

const MASK_DELTA = 0xa282ead8
const HEADER_BYTES = 12
const FOOTER_BYTES = 4

export class TfRecordError extends Error {
  override name = 'TfRecordError'
}

export function maskedCrc32c(bytes: Uint8Array): number {
  const crc = crc32c(bytes)
  return (((crc >>> 15) | (crc << 17)) + MASK_DELTA) >>> 0
}

/** The records framed one after another, as one buffer. */
export function frameRecords(records: readonly Uint8Array[]): Uint8Array {
  const total = records.reduce((sum, r) => sum + HEADER_BYTES + r.length + FOOTER_BYTES, 0)
  const out = new Uint8Array(total)
  const view = new DataView(out.buffer)
  let at = 0
  for (const data of records) {
    view.setUint32(at, data.length % 2 ** 32, true)
    view.setUint32(at + 4, Math.floor(data.length / 2 ** 32), true)
    view.setUint32(at + 8, maskedCrc32c(out.subarray(at, at + 8)), true)
    out.set(data, at + HEADER_BYTES)
    at += HEADER_BYTES + data.length
    view.setUint32(at, maskedCrc32c(data), true)
    at += FOOTER_BYTES
  }
  return out
}

/** The records of a TFRecord file, both CRCs of each checked; a truncated or corrupt file throws TfRecordError. */
export function readRecords(bytes: Uint8Array): Uint8Array[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const records: Uint8Array[] = []
  let at = 0
  const fail = (problem: string) => new TfRecordError(`record ${records.length} at byte ${at}: ${problem}`)
  while (at < bytes.length) {
    const left = bytes.length - at
    if (left < HEADER_BYTES) throw fail(`truncated header (${left} bytes)`)
    const lengthCrc = view.getUint32(at + 8, true)
    const lengthComputed = maskedCrc32c(bytes.subarray(at, at + 8))
    if (lengthCrc !== lengthComputed) throw fail(`length CRC ${hex(lengthCrc)}, computed ${hex(lengthComputed)}`)
    const length = view.getBigUint64(at, true)
    if (length > BigInt(left - HEADER_BYTES - FOOTER_BYTES)) {
      throw fail(`needs ${length} data bytes + ${FOOTER_BYTES} CRC bytes, ${left - HEADER_BYTES} left`)
    }
    const data = bytes.subarray(at + HEADER_BYTES, at + HEADER_BYTES + Number(length))
    const dataCrc = view.getUint32(at + HEADER_BYTES + data.length, true)
    const dataComputed = maskedCrc32c(data)
    if (dataCrc !== dataComputed) throw fail(`data CRC ${hex(dataCrc)}, computed ${hex(dataComputed)}`)
    records.push(data)
    at += HEADER_BYTES + data.length + FOOTER_BYTES
  }
  return records
}

const hex = (n: number) => `0x${n.toString(16).padStart(8, '0')}`
