import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { ScoredSample } from '../../compute/index.ts'
import {
  decodeRescore,
  encodeRescore,
  RESCORE_FORMAT_VERSION,
  RescoreFormatError,
} from '../../records/rescore-format.ts'

const KEY = 'runs/r1/iterations/0000/rescore/0000.bin'

function sample(overrides: Partial<ScoredSample> = {}): ScoredSample {
  return {
    trajectory: 3,
    group: 1,
    step: 2,
    promptIds: [5, 6, 7, 4_000_000_000],
    responseIds: [9, 10, 11],
    valid: true,
    episodeReward: -0.1,
    trajectoryLength: 4,
    // values a float32 graph gives, one a float64 graph gives, and the edges of float64
    old: Float64Array.from([Math.fround(-1.2345678), -0.1 - 1e-17, -Number.MIN_VALUE]),
    ref: Float64Array.from([-0, -2.5, Math.fround(-3.3)]),
    teacher: Float64Array.from([-1 / 3, -1e-300, -700.5]),
    teacherPromptIds: [5, 99, 98, 6, 7],
    ...overrides,
  }
}

const SAMPLES: ScoredSample[] = [
  sample(),
  sample({ trajectory: 4, step: 0, valid: false, teacher: null, teacherPromptIds: null, episodeReward: 1 }),
  sample({ responseIds: [], old: new Float64Array(0), ref: new Float64Array(0), teacher: new Float64Array(0) }),
]

function rescoreError(bytes: Uint8Array, pattern: RegExp): void {
  assert.throws(
    () => decodeRescore(bytes, KEY),
    (e: unknown) => {
      assert.ok(e instanceof RescoreFormatError, String(e))
      assert.equal(e.name, 'RescoreFormatError')
      assert.ok(e.message.startsWith(`${KEY}: `), e.message)
      assert.match(e.message, pattern)
      return true
    },
  )
}

describe('rescore artifact format', () => {
  it('round-trips metadata, token ids and every log-prob bit for bit', () => {
    const decoded = decodeRescore(encodeRescore(SAMPLES), KEY)
    assert.equal(decoded.length, SAMPLES.length)
    decoded.forEach((d, i) => {
      const s = SAMPLES[i]!
      assert.deepEqual({ ...d, old: null, ref: null, teacher: null }, { ...s, old: null, ref: null, teacher: null })
      for (const name of ['old', 'ref', 'teacher'] as const) {
        const want = s[name]
        const got = d[name]
        if (want === null) {
          assert.equal(got, null)
          continue
        }
        assert.ok(got instanceof Float64Array)
        assert.equal(got.length, want.length)
        for (const [k, v] of want.entries()) assert.ok(Object.is(got[k], v), `${name}[${k}]: ${got[k]} vs ${v}`)
      }
    })
  })

  it('lays the file out as documented: magic, version, 8-byte aligned sections, exact length', () => {
    const bytes = encodeRescore(SAMPLES)
    assert.equal(bytes.subarray(0, 8).toString('latin1'), 'SEEDRESC')
    assert.equal(bytes.readUInt32LE(8), RESCORE_FORMAT_VERSION)
    const headerBytes = bytes.readUInt32LE(12)
    assert.equal((16 + headerBytes) % 8, 0)
    const header = JSON.parse(bytes.subarray(16, 16 + headerBytes).toString('utf8'))
    assert.deepEqual(
      { ...header, producer: undefined },
      {
        producer: undefined,
        samples: 3,
        tokenIds: 3 * 4 + 2 * 3 + 2 * 5,
        logProbs: 3 * 3 + 3 * 2,
        float: 'float64',
      },
    )
    assert.match(header.producer, /^seedflow \d/)
    const ids = 4 * header.tokenIds
    assert.equal(bytes.length, 16 + headerBytes + 40 * 3 + Math.ceil(ids / 8) * 8 + 8 * header.logProbs)
    assert.deepEqual(encodeRescore(SAMPLES), bytes)
  })

  it('refuses a file with another magic, naming the key and the magic found', () => {
    const bytes = encodeRescore(SAMPLES)
    bytes.write('SEEDRESX', 0, 'latin1')
    rescoreError(bytes, /not a rescore file: magic "SEEDRESX", expected "SEEDRESC"/)
    rescoreError(Buffer.from([0x1f, 0x8b, 0x08, 0x00]), /not a rescore file: magic/)
  })

  it('refuses an unknown format version, saying who wrote it and what to rerun', () => {
    const bytes = encodeRescore(SAMPLES)
    bytes.writeUInt32LE(7, 8)
    rescoreError(bytes, /format version 7, written by seedflow \S+; seedflow \S+ reads version 1: rerun the/)
  })

  it('refuses a truncated file wherever it was cut', () => {
    const bytes = encodeRescore(SAMPLES)
    const headerEnd = 16 + bytes.readUInt32LE(12)
    for (const cut of [0, 5, 12, headerEnd - 3, headerEnd + 17, bytes.length - 200, bytes.length - 1]) {
      rescoreError(bytes.subarray(0, cut), new RegExp(`^${KEY}: truncated: ${cut} bytes, .* needs \\d+$`))
    }
  })

  it('refuses trailing bytes and a header that disagrees with the sample table', () => {
    const bytes = encodeRescore(SAMPLES)
    rescoreError(Buffer.concat([bytes, Buffer.alloc(8)]), /8 trailing bytes after the \d+ bytes of the layout/)
    const lying = Buffer.from(bytes)
    lying.writeUInt32LE(2, 16 + lying.readUInt32LE(12) + 20) // sample 0 now claims 2 response tokens, not 3
    rescoreError(lying, /the header counts 28 token ids and 15 log-probs, the sample table 27 and 12/)
  })

  it('refuses to encode log-probs that do not match the response', () => {
    assert.throws(
      () => encodeRescore([sample({ ref: new Float64Array(2) })]),
      /sample 0 \(trajectory 3, step 2\) has 3 response tokens but 3 old, 2 ref, 3 teacher and no control log-probs/,
    )
  })
})
