// The TensorBoard event-file writer against TensorBoard's own: test/fixtures/tensorboard/ is written by
// bench/compare/tensorboard_fixture.py with the tensorboard package's RecordWriter and protos.
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { crc32c } from '../../exports/tensorboard/crc32c.ts'
import { decodeEvent, FILE_VERSION } from '../../exports/tensorboard/event.ts'
import { frameRecords, maskedCrc32c, readRecords, TfRecordError } from '../../exports/tensorboard/tfrecord.ts'
import {
  encodeEventFile,
  eventFileName,
  type ScalarPoint,
  ScalarPointError,
  writeEventFile,
} from '../../exports/tensorboard/writer.ts'

const fixture = (file: string) => fileURLToPath(new URL(`../fixtures/tensorboard/${file}`, import.meta.url))

interface Fixture {
  fileVersionWallTime: number
  scalars: ScalarPoint[]
}

const loadFixture = async (): Promise<Fixture> => JSON.parse(await readFile(fixture('scalars.json'), 'utf8'))

const POINTS: ScalarPoint[] = [
  { tag: 'rollout/success_rate', step: 0, wallTime: 1700000000.25, value: 0.5 },
  { tag: 'update/pg_loss', step: 2 ** 40, wallTime: 1700000001.75, value: -0.001 },
]

describe('crc32c', () => {
  it('gives the Castagnoli check value for "123456789"', () => {
    assert.equal(crc32c(new TextEncoder().encode('123456789')), 0xe3069283)
  })

  it('is 0 for no bytes', () => {
    assert.equal(crc32c(new Uint8Array(0)), 0)
  })
})

describe('tfrecord', () => {
  it('reads back the records it frames', () => {
    const records = [new Uint8Array([1, 2, 3]), new Uint8Array(0), new Uint8Array(300).fill(7)]
    assert.deepEqual(readRecords(frameRecords(records)), records)
  })

  it('masks the CRC of the length bytes in the header', () => {
    const framed = frameRecords([new Uint8Array(5)])
    const view = new DataView(framed.buffer)
    assert.equal(view.getUint32(8, true), maskedCrc32c(framed.subarray(0, 8)))
  })

  it('detects a flipped byte anywhere in the file', () => {
    const framed = frameRecords([new Uint8Array([1, 2, 3]), new Uint8Array([4, 5])])
    for (let i = 0; i < framed.length; i++) {
      const bad = framed.slice()
      bad[i] = (bad[i] as number) ^ 0x10
      assert.throws(() => readRecords(bad), TfRecordError, `byte ${i}`)
    }
  })

  it('names the record and the CRCs of a corrupt one', () => {
    const framed = frameRecords([new Uint8Array([1, 2, 3]), new Uint8Array([4, 5])])
    framed[31] = (framed[31] as number) ^ 0xff // the second record's first data byte
    assert.throws(() => readRecords(framed), {
      name: 'TfRecordError',
      message: /^record 1 at byte 19: data CRC 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}$/,
    })
  })

  it('detects a truncated file', () => {
    const framed = frameRecords([new Uint8Array([1, 2, 3])])
    assert.throws(() => readRecords(framed.subarray(0, framed.length - 1)), {
      name: 'TfRecordError',
      message: 'record 0 at byte 0: needs 3 data bytes + 4 CRC bytes, 6 left',
    })
    assert.throws(() => readRecords(framed.subarray(0, 5)), {
      name: 'TfRecordError',
      message: 'record 0 at byte 0: truncated header (5 bytes)',
    })
  })
})

describe('event files', () => {
  it("equals tensorboard's own bytes for the fixture's scalars", async () => {
    const { fileVersionWallTime, scalars } = await loadFixture()
    const expected = new Uint8Array(await readFile(fixture('scalars.tfevents')))
    assert.deepEqual(encodeEventFile(scalars, { fileVersionWallTime }), expected)
  })

  it('decodes back to the file-version event and the points, values rounded to float32', () => {
    const events = readRecords(encodeEventFile(POINTS, { fileVersionWallTime: 1700000000.5 })).map(decodeEvent)
    assert.deepEqual(events, [
      { wallTime: 1700000000.5, step: 0, fileVersion: FILE_VERSION, values: [] },
      ...POINTS.map((p) => ({
        wallTime: p.wallTime,
        step: p.step,
        values: [{ tag: p.tag, value: Math.fround(p.value) }],
      })),
    ])
  })

  it('writes events.out.tfevents.<seconds>.<hostname> into the folder', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'seedflow-tensorboard-'))
    try {
      const path = await writeEventFile(join(dir, 'run'), POINTS, { fileVersionWallTime: 1700000000.9, hostname: 'h1' })
      assert.equal(path, join(dir, 'run', 'events.out.tfevents.1700000000.h1'))
      assert.deepEqual(
        new Uint8Array(await readFile(path)),
        encodeEventFile(POINTS, { fileVersionWallTime: 1700000000.9 }),
      )
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('pads the seconds to 10 digits, as TensorBoard does', () => {
    assert.equal(eventFileName(12.7, 'h'), 'events.out.tfevents.0000000012.h')
  })

  const bad = (patch: Partial<ScalarPoint>) => () =>
    encodeEventFile([POINTS[0] as ScalarPoint, { ...(POINTS[0] as ScalarPoint), step: 5, ...patch }], {
      fileVersionWallTime: 1,
    })

  it('rejects a non-finite value', () => {
    assert.throws(bad({ value: Number.NaN }), {
      name: 'ScalarPointError',
      message: 'scalar 1 (tag "rollout/success_rate", step 5): value NaN is not finite',
    })
    assert.throws(bad({ value: Number.POSITIVE_INFINITY }), RangeError)
  })

  it('rejects a value beyond float32', () => {
    assert.throws(bad({ value: 1e39 }), {
      name: 'ScalarPointError',
      message:
        'scalar 1 (tag "rollout/success_rate", step 5): value 1e+39 overflows float32 (TensorBoard\'s simple_value)',
    })
  })

  it('rejects a negative or fractional step', () => {
    assert.throws(bad({ step: -1 }), {
      name: 'ScalarPointError',
      message: 'scalar 1 (tag "rollout/success_rate", step -1): step must be a non-negative integer',
    })
    assert.throws(bad({ step: 1.5 }), ScalarPointError)
  })

  it('rejects an empty tag', () => {
    assert.throws(bad({ tag: '' }), {
      name: 'ScalarPointError',
      message: 'scalar 1 (tag "", step 5): empty tag',
    })
  })

  it('rejects a non-finite wall time', () => {
    assert.throws(bad({ wallTime: Number.NaN }), RangeError)
    assert.throws(() => encodeEventFile(POINTS, { fileVersionWallTime: Number.POSITIVE_INFINITY }), {
      name: 'RangeError',
      message: 'fileVersionWallTime Infinity is not finite',
    })
  })
})
