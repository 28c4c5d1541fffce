// The rescore artifact (`iterations/{k}/rescore/{shard}.bin`): every step sample's metadata and token ids, and
// its old / reference / teacher log-probs, in one little-endian binary file. Version 1:
//
//   offset      bytes      field
//   0           8          magic, ASCII "SEEDRESC"
//   8           4          u32 format version (1)
//   12          4          u32 H, the header's length in bytes
//   16          H          header, UTF-8 JSON, space-padded so that 16 + H is a multiple of 8:
//                          {"producer":"seedflow <version>","samples":n,"tokenIds":I,"logProbs":L,"float":"float64"}
//   16+H        40·n       sample table, one 40-byte record per sample:
//                            +0 u32 trajectory  +4 u32 group  +8 u32 step
//                            +12 u32 flags (bit 0 valid, bit 1 teacher log-probs, bit 2 teacher prompt,
//                                           bit 3 control log-probs: the `control` OPD gate, only with bit 1)
//                            +16 u32 prompt tokens P  +20 u32 response tokens R  +24 u32 teacher prompt tokens Q
//                            +28 u32 trajectory length (steps)  +32 f64 episode reward
//   then       4·I + pad   token ids (u32), sample by sample: prompt (P), response (R), teacher prompt (Q);
//                          zero bytes up to a multiple of 8
//   then       8·L         log-probs (f64), sample by sample: old (R), ref (R), teacher (R, when bit 1 is set),
//                          control (R, when bit 3 is set)
//
// The file is exactly that long: a shorter one is truncated, a longer one has trailing bytes, both corrupt.
// Log-probs are float64 because the score graph runs in the model's dtype (float32 by default, float64 on
// request) and rescore widens them to float64: float64 holds either bit for bit, so the old log-probs the
// update feeds are the ones the score graph computed, and the first mini-batch's ratio is exactly 1 (clip
// fraction 0). float32 would round a float64 model's log-probs; the extra 12 bytes a token are small beside a
// checkpoint.
import type { ScoredSample } from '../compute/index.ts'
import { SEEDFLOW_VERSION } from './seedflow-version.ts'

export const RESCORE_MAGIC = 'SEEDRESC'
export const RESCORE_FORMAT_VERSION = 1

const PREAMBLE_BYTES = 16
const RECORD_BYTES = 40
const U32_MAX = 0xffff_ffff

const FLAG = { valid: 1, teacher: 2, teacherPrompt: 4, control: 8 } as const
const KNOWN_FLAGS = FLAG.valid | FLAG.teacher | FLAG.teacherPrompt | FLAG.control

/** The log-prob arrays of a sample in file order: old, ref, then teacher and control where present. */
function logProbArrays(s: ScoredSample): Float64Array[] {
  return [s.old, s.ref, ...(s.teacher ? [s.teacher] : []), ...(s.control ? [s.control] : [])]
}

/** The decoded file is not a rescore artifact this version can read: wrong magic or version, truncated, inconsistent. */
export class RescoreFormatError extends Error {
  override name = 'RescoreFormatError'
}

export interface RescoreHeader {
  producer: string
  samples: number
  /** Token ids in the file (prompt, response and teacher prompt ids of every sample). */
  tokenIds: number
  /** Log-probs in the file (old, ref and, where present, teacher and control of every sample). */
  logProbs: number
  float: 'float64'
}

const pad8 = (n: number): number => Math.ceil(n / 8) * 8

function u32(value: number, what: string): number {
  if (!Number.isInteger(value) || value < 0 || value > U32_MAX) {
    throw new RangeError(`rescore encode: ${what} must be an integer in 0..${U32_MAX}, got ${value}`)
  }
  return value
}

/** The file's bytes for these samples (deterministic: equal samples give equal bytes). */
export function encodeRescore(samples: readonly ScoredSample[]): Buffer {
  let tokenIds = 0
  let logProbs = 0
  samples.forEach((s, i) => {
    const R = s.responseIds.length
    const arrays = logProbArrays(s)
    if (arrays.some((a) => a.length !== R)) {
      throw new RangeError(
        `rescore encode: sample ${i} (trajectory ${s.trajectory}, step ${s.step}) has ${R} response tokens but ` +
          `${s.old.length} old, ${s.ref.length} ref, ${s.teacher?.length ?? 'no'} teacher and ` +
          `${s.control?.length ?? 'no'} control log-probs`,
      )
    }
    if (s.control && !s.teacher) {
      throw new RangeError(
        `rescore encode: sample ${i} (trajectory ${s.trajectory}, step ${s.step}) has control log-probs but no teacher`,
      )
    }
    tokenIds += s.promptIds.length + R + (s.teacherPromptIds?.length ?? 0)
    logProbs += R * arrays.length
  })
  const header: RescoreHeader = {
    producer: `seedflow ${SEEDFLOW_VERSION}`,
    samples: samples.length,
    tokenIds,
    logProbs,
    float: 'float64',
  }
  const json = JSON.stringify(header)
  const headerBytes = pad8(PREAMBLE_BYTES + Buffer.byteLength(json, 'utf8')) - PREAMBLE_BYTES
  const tableAt = PREAMBLE_BYTES + headerBytes
  const idsAt = tableAt + RECORD_BYTES * samples.length
  const logProbsAt = idsAt + pad8(4 * tokenIds)
  const out = Buffer.alloc(logProbsAt + 8 * logProbs)
  out.write(RESCORE_MAGIC, 0, 'ascii')
  out.writeUInt32LE(RESCORE_FORMAT_VERSION, 8)
  out.writeUInt32LE(headerBytes, 12)
  out.write(json.padEnd(headerBytes, ' '), PREAMBLE_BYTES, 'utf8')
  let id = idsAt
  let lp = logProbsAt
  samples.forEach((s, i) => {
    const at = tableAt + RECORD_BYTES * i
    const flags =
      (s.valid ? FLAG.valid : 0) |
      (s.teacher ? FLAG.teacher : 0) |
      (s.teacherPromptIds ? FLAG.teacherPrompt : 0) |
      (s.control ? FLAG.control : 0)
    out.writeUInt32LE(u32(s.trajectory, 'trajectory'), at)
    out.writeUInt32LE(u32(s.group, 'group'), at + 4)
    out.writeUInt32LE(u32(s.step, 'step'), at + 8)
    out.writeUInt32LE(flags, at + 12)
    out.writeUInt32LE(s.promptIds.length, at + 16)
    out.writeUInt32LE(s.responseIds.length, at + 20)
    out.writeUInt32LE(s.teacherPromptIds?.length ?? 0, at + 24)
    out.writeUInt32LE(u32(s.trajectoryLength, 'trajectoryLength'), at + 28)
    out.writeDoubleLE(s.episodeReward, at + 32)
    for (const ids of [s.promptIds, s.responseIds, s.teacherPromptIds ?? []]) {
      for (const t of ids) {
        out.writeUInt32LE(u32(t, 'a token id'), id)
        id += 4
      }
    }
    for (const values of logProbArrays(s)) {
      for (const v of values) {
        out.writeDoubleLE(v, lp)
        lp += 8
      }
    }
  })
  return out
}

/** Reads a rescore artifact; `source` (its key) names the file in every error. */
export function decodeRescore(bytes: Uint8Array, source: string): ScoredSample[] {
  const fail = (reason: string) => new RescoreFormatError(`${source}: ${reason}`)
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const magic = buf.subarray(0, 8).toString('latin1')
  if (!RESCORE_MAGIC.startsWith(magic)) {
    throw fail(
      `not a rescore file: magic ${JSON.stringify(magic)}, expected ${JSON.stringify(RESCORE_MAGIC)} ` +
        '(files written before the binary format are gzipped JSON lines: rerun the rescore phase)',
    )
  }
  const needs = (end: number, what: string) => {
    if (buf.length < end) throw fail(`truncated: ${buf.length} bytes, ${what} needs ${end}`)
  }
  needs(PREAMBLE_BYTES, 'the preamble')
  const version = buf.readUInt32LE(8)
  const headerBytes = buf.readUInt32LE(12)
  if (version !== RESCORE_FORMAT_VERSION) {
    throw fail(
      `format version ${version}${producerOf(buf, headerBytes)}; seedflow ${SEEDFLOW_VERSION} reads version ` +
        `${RESCORE_FORMAT_VERSION}: rerun the iteration's rescore phase with this version, or read it with the one that wrote it`,
    )
  }
  needs(PREAMBLE_BYTES + headerBytes, `a header of ${headerBytes} bytes`)
  const header = parseHeader(buf.subarray(PREAMBLE_BYTES, PREAMBLE_BYTES + headerBytes), fail)
  const tableAt = PREAMBLE_BYTES + headerBytes
  if (tableAt % 8 !== 0) throw fail(`the header ends at byte ${tableAt}, not on an 8-byte boundary`)
  const idsAt = tableAt + RECORD_BYTES * header.samples
  needs(idsAt, `a sample table of ${header.samples} records`)
  const records = Array.from({ length: header.samples }, (_, i) => {
    const at = tableAt + RECORD_BYTES * i
    const flags = buf.readUInt32LE(at + 12)
    if ((flags & ~KNOWN_FLAGS) !== 0) throw fail(`sample ${i} has unknown flags 0x${flags.toString(16)}`)
    if (flags & FLAG.control && !(flags & FLAG.teacher)) throw fail(`sample ${i} has control log-probs but no teacher`)
    return {
      trajectory: buf.readUInt32LE(at),
      group: buf.readUInt32LE(at + 4),
      step: buf.readUInt32LE(at + 8),
      flags,
      P: buf.readUInt32LE(at + 16),
      R: buf.readUInt32LE(at + 20),
      Q: buf.readUInt32LE(at + 24),
      trajectoryLength: buf.readUInt32LE(at + 28),
      episodeReward: buf.readDoubleLE(at + 32),
    }
  })
  const tokenIds = records.reduce((n, r) => n + r.P + r.R + r.Q, 0)
  const arraysOf = (flags: number) => 2 + (flags & FLAG.teacher ? 1 : 0) + (flags & FLAG.control ? 1 : 0)
  const logProbs = records.reduce((n, r) => n + r.R * arraysOf(r.flags), 0)
  if (tokenIds !== header.tokenIds || logProbs !== header.logProbs) {
    throw fail(
      `the header counts ${header.tokenIds} token ids and ${header.logProbs} log-probs, ` +
        `the sample table ${tokenIds} and ${logProbs}`,
    )
  }
  const logProbsAt = idsAt + pad8(4 * tokenIds)
  const end = logProbsAt + 8 * logProbs
  needs(end, `${header.samples} samples with ${tokenIds} token ids and ${logProbs} log-probs`)
  if (buf.length > end) throw fail(`${buf.length - end} trailing bytes after the ${end} bytes of the layout`)
  let id = idsAt
  let lp = logProbsAt
  const ids = (n: number): number[] => {
    const out = new Array<number>(n)
    for (let k = 0; k < n; k++, id += 4) out[k] = buf.readUInt32LE(id)
    return out
  }
  const floats = (n: number): Float64Array => {
    const out = new Float64Array(n)
    for (let k = 0; k < n; k++, lp += 8) out[k] = buf.readDoubleLE(lp)
    return out
  }
  return records.map((r) => {
    const promptIds = ids(r.P)
    const responseIds = ids(r.R)
    const teacherPromptIds = ids(r.Q)
    const old = floats(r.R)
    const ref = floats(r.R)
    return {
      trajectory: r.trajectory,
      group: r.group,
      step: r.step,
      promptIds,
      responseIds,
      valid: (r.flags & FLAG.valid) !== 0,
      episodeReward: r.episodeReward,
      trajectoryLength: r.trajectoryLength,
      old,
      ref,
      teacher: r.flags & FLAG.teacher ? floats(r.R) : null,
      ...(r.flags & FLAG.control ? { control: floats(r.R) } : {}),
      teacherPromptIds: r.flags & FLAG.teacherPrompt ? teacherPromptIds : null,
    }
  })
}

function parseHeader(bytes: Buffer, fail: (reason: string) => RescoreFormatError): RescoreHeader {
  let value: unknown
  try {
    value = JSON.parse(bytes.toString('utf8'))
  } catch (error) {
    throw fail(`the header is not JSON (${(error as Error).message})`)
  }
  const h = value as Partial<RescoreHeader> | null
  const count = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0
  if (!h || typeof h !== 'object' || !count(h.samples) || !count(h.tokenIds) || !count(h.logProbs)) {
    throw fail(`the header lacks sample, token id or log-prob counts: ${bytes.toString('utf8').trim()}`)
  }
  if (h.float !== 'float64') throw fail(`the header's float type is ${JSON.stringify(h.float)}, expected "float64"`)
  return h as RescoreHeader
}

/** ", written by seedflow X" when a file of another version still carries a readable header. */
function producerOf(buf: Buffer, headerBytes: number): string {
  try {
    const h = JSON.parse(buf.subarray(PREAMBLE_BYTES, PREAMBLE_BYTES + headerBytes).toString('utf8'))
    return typeof h?.producer === 'string' ? `, written by ${h.producer}` : ''
  } catch {
    return ''
  }
}
