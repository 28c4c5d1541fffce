// CRC-32C (Castagnoli; reflected polynomial 0x82F63B78), the checksum of TFRecord framing. Table-driven, one byte
// at a time: event files are small, so the 8-table slicing variants are not worth their size here.
const POLYNOMIAL = 0x82f63b78

function makeTable(): Uint32Array {
  const table = new Uint32Array(256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? POLYNOMIAL ^ (c >>> 1) : c >>> 1
    table[n] = c
  }
  return table
}

const TABLE = makeTable()

/** CRC-32C of `bytes`, as an unsigned 32-bit number (crc32c("123456789") = 0xE3069283). */
export function crc32c(bytes: Uint8Array): number {
  let crc = 0xffffffff
  for (const byte of bytes) crc = (TABLE[(crc ^ byte) & 0xff] as number) ^ (crc >>> 8)
  return (crc ^ 0xffffffff) >>> 0
}
