// Against an independent implementation: blocks dequantized by gguf-py (llama.cpp's Python library), written by
// test/fixtures/gguf/make_dequant_fixtures.py. Every format is compared bit for bit: each decoder's float64
// arithmetic is exact until the one rounding to float32, which is the rounding gguf-py's float32 numpy code does
// (see policy/gguf/dequantize.ts), and F32/F16/BF16 keep NaN payloads as numpy does.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { copyFile, mkdtemp, readFile, rm, truncate, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { DEQUANTIZABLE_TYPES, dequantize, GGML_TYPES } from '../../policy/gguf/dequantize.ts'
import { GgufError } from '../../policy/gguf/gguf-error.ts'
import { checkSupported, type GgufFile, openGguf } from '../../policy/gguf/gguf-file.ts'
import { HALF_TO_FLOAT_BITS } from '../../policy/gguf/half.ts'

const fixture = (file: string) => fileURLToPath(new URL(`../fixtures/gguf/${file}`, import.meta.url))

interface Manifest {
  formats: Record<string, { type: number; blockSize: number; typeSize: number; blocks: number; values: number }>
  ggmlTypes: Record<string, [number, number, number]>
}
const MANIFEST = JSON.parse(readFileSync(fixture('manifest.json'), 'utf8')) as Manifest

interface TinyExpected {
  alignment: number
  metadata: Record<string, unknown>
  tensors: { name: string; shape: number[]; type: string; values?: number[] }[]
}
const TINY = JSON.parse(readFileSync(fixture('tiny.expected.json'), 'utf8')) as TinyExpected
const SUPPORTED = 'F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K'

function bytesOf(file: string): Uint8Array {
  return new Uint8Array(readFileSync(fixture(file)))
}

function float32Of(file: string): Float32Array {
  const bytes = bytesOf(file)
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4)
}

/** Fails listing the first few values whose float32 bit patterns differ. */
function assertSameBits(actual: Float32Array, expected: Float32Array, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`)
  const a = new Uint32Array(actual.buffer, actual.byteOffset, actual.length)
  const e = new Uint32Array(expected.buffer, expected.byteOffset, expected.length)
  const bad: string[] = []
  for (let i = 0; i < a.length; i++) {
    if (a[i] !== e[i]) {
      const hex = (n: number | undefined) => `0x${(n as number).toString(16).padStart(8, '0')}`
      bad.push(`[${i}] got ${actual[i]} (${hex(a[i])}), expected ${expected[i]} (${hex(e[i])})`)
    }
  }
  assert.equal(bad.length, 0, `${what}: ${bad.length} of ${a.length} values differ:\n  ${bad.slice(0, 8).join('\n  ')}`)
}

describe('dequantize', () => {
  it('has a fixture for exactly the types it supports', () => {
    assert.deepEqual([...DEQUANTIZABLE_TYPES].sort(), Object.keys(MANIFEST.formats).sort())
    assert.equal(DEQUANTIZABLE_TYPES.join(', '), SUPPORTED)
  })

  it('has the same type table as gguf-py (ids, block sizes, bytes per block)', () => {
    const ours = Object.fromEntries([...GGML_TYPES.values()].map((t) => [t.name, [t.id, t.blockSize, t.typeSize]]))
    assert.deepEqual(ours, MANIFEST.ggmlTypes)
  })

  for (const [name, format] of Object.entries(MANIFEST.formats)) {
    it(`matches gguf-py bit for bit on ${name} (${format.blocks} blocks)`, () => {
      const out = dequantize(format.type, bytesOf(`${name}.blocks.bin`), format.values, name)
      assertSameBits(out, float32Of(`${name}.expected.bin`), name)
    })
  }

  it('converts every f16 bit pattern as the IEEE definition says', () => {
    const got = new Float32Array(HALF_TO_FLOAT_BITS.buffer)
    for (let h = 0; h < 65536; h++) {
      const sign = h & 0x8000 ? -1 : 1
      const exponent = (h >> 10) & 0x1f
      const fraction = h & 0x3ff
      if (exponent === 31 && fraction !== 0) {
        // NaN: sign and payload carried over, as numpy's conversion does
        assert.equal(HALF_TO_FLOAT_BITS[h], (((h & 0x8000) << 16) | 0x7f800000 | (fraction << 13)) >>> 0, `half ${h}`)
        continue
      }
      const value =
        exponent === 31
          ? sign * Number.POSITIVE_INFINITY
          : exponent === 0
            ? sign * fraction * 2 ** -24
            : sign * 2 ** (exponent - 15) * (1 + fraction / 1024)
      assert.ok(Object.is(got[h], value), `half 0x${h.toString(16)}: got ${got[h]}, expected ${value}`)
    }
  })

  it('refuses a type it cannot dequantize, naming the tensor and the type', () => {
    assert.throws(
      () => dequantize(16, new Uint8Array(66), 256, 'blk.0.attn_q.weight'),
      (e: unknown) => {
        assert.ok(e instanceof GgufError)
        assert.equal(
          e.message,
          `tensor blk.0.attn_q.weight has type IQ2_XXS, which seedflow cannot dequantize (supported: ${SUPPORTED})`,
        )
        return true
      },
    )
    for (const [type, name] of [
      [10, 'Q2_K'],
      [11, 'Q3_K'],
      [15, 'Q8_K'],
      [24, 'I8'],
      [35, 'TQ2_0'],
      [39, 'MXFP4'],
    ] as const) {
      assert.throws(() => dequantize(type, new Uint8Array(0), 0), new RegExp(`^GgufError: data has type ${name},`))
    }
  })

  it('refuses an id that is no ggml type', () => {
    assert.throws(() => dequantize(99, new Uint8Array(4), 1, 'w'), {
      name: 'GgufError',
      message: `tensor w has type unknown ggml type 99, which seedflow cannot dequantize (supported: ${SUPPORTED})`,
    })
  })

  it('refuses a truncated buffer, with the sizes', () => {
    const bytes = bytesOf('Q4_K.blocks.bin')
    assert.throws(() => dequantize(12, bytes.subarray(0, bytes.byteLength - 1), 2048, 'w'), {
      name: 'GgufError',
      message: 'tensor w: 2048 Q4_K values take 1152 bytes, got 1151 (truncated)',
    })
  })

  it('refuses a count that is not a whole number of blocks', () => {
    assert.throws(() => dequantize(2, new Uint8Array(18), 31, 'w'), {
      name: 'GgufError',
      message: 'tensor w: 31 elements of Q4_0 is not a whole number of 32-element blocks',
    })
  })
})

describe('openGguf', () => {
  let dir: string
  let tiny: GgufFile
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'seedflow-gguf-'))
    tiny = await openGguf(fixture('tiny.gguf'))
  })
  after(async () => {
    await tiny.close()
    await rm(dir, { recursive: true, force: true })
  })

  it('reads the metadata, 64-bit integers as numbers where they fit', () => {
    assert.equal(tiny.version, 3)
    const expected: Record<string, unknown> = { ...TINY.metadata, 'seedflow.big_u64': 2n ** 60n + 1n }
    assert.deepEqual(tiny.metadata, expected)
  })

  it('lists the tensors in ggml shape order, aligned as general.alignment says', () => {
    assert.deepEqual(
      tiny.tensors.map((t) => ({ name: t.name, shape: t.shape, type: t.typeName })),
      TINY.tensors.map((t) => ({ name: t.name, shape: t.shape, type: t.type })),
    )
    assert.equal(tiny.dataOffset % TINY.alignment, 0)
    for (const t of tiny.tensors) {
      assert.equal(t.byteOffset % TINY.alignment, 0, t.name)
      assert.equal(
        t.elements,
        t.shape.reduce((a, b) => a * b, 1),
        t.name,
      )
    }
    const q4k = tiny.tensors.find((t) => t.name === 'blk.0.ffn_down.weight')
    assert.deepEqual([q4k?.type, q4k?.byteLength], [12, 2 * 144])
  })

  it('reads each tensor as gguf-py dequantizes it', async () => {
    for (const t of TINY.tensors) {
      if (!t.values) continue
      assertSameBits(await tiny.read(t.name), Float32Array.from(t.values), t.name)
    }
  })

  it('names an unsupported tensor before any data is read', async () => {
    const message = `tensor seedflow.unsupported has type I8, which seedflow cannot dequantize (supported: ${SUPPORTED})`
    assert.throws(() => checkSupported(tiny.tensors), { name: 'GgufError', message })
    await assert.rejects(tiny.read('seedflow.unsupported'), { name: 'GgufError', message })
    checkSupported(tiny.tensors.filter((t) => t.typeName !== 'I8'))
  })

  it('counts the other unsupported tensors', () => {
    const bad = tiny.tensors.map((t) => ({ ...t, type: 16, typeName: 'IQ2_XXS' }))
    assert.throws(() => checkSupported(bad), {
      message: /^tensor token_embd\.weight has type IQ2_XXS, .*; 6 more tensors have unsupported types \(IQ2_XXS\)$/,
    })
  })

  it('refuses an unknown tensor name', async () => {
    await assert.rejects(tiny.read('nope'), {
      name: 'GgufError',
      message: `${fixture('tiny.gguf')} has no tensor named nope`,
    })
  })

  it('refuses a file that is not GGUF, naming the path', async () => {
    const path = join(dir, 'model.safetensors')
    await writeFile(path, 'this is not a gguf file at all')
    await assert.rejects(openGguf(path), {
      name: 'GgufError',
      message: `${path} is not a GGUF file: it starts with [74 68 69 73], not "GGUF"`,
    })
  })

  it('refuses a missing file, naming the path', async () => {
    const path = join(dir, 'missing.gguf')
    await assert.rejects(openGguf(path), { name: 'GgufError', message: new RegExp(`^${path}: cannot open: ENOENT`) })
  })

  it('refuses a file cut short in the tensor data, naming the tensor', async () => {
    const path = join(dir, 'cut.gguf')
    await copyFile(fixture('tiny.gguf'), path)
    const last = tiny.tensors.at(-1) as GgufFile['tensors'][number]
    const size = last.byteOffset + last.byteLength - 1
    await truncate(path, size)
    await assert.rejects(openGguf(path), {
      name: 'GgufError',
      message:
        `${path} is truncated: tensor seedflow.unsupported (I8[4, 2]) needs bytes ` +
        `[${last.byteOffset}, ${last.byteOffset + last.byteLength}), the file has ${size}`,
    })
  })

  it('refuses a file cut short in its header', async () => {
    const path = join(dir, 'cut-header.gguf')
    await writeFile(path, (await readFile(fixture('tiny.gguf'))).subarray(0, 200))
    await assert.rejects(openGguf(path), {
      name: 'GgufError',
      message: `${path} is truncated: the file ends (200 bytes) inside its header`,
    })
  })

  it('refuses a quantized tensor whose rows are not whole blocks', async () => {
    const path = join(dir, 'rows.gguf')
    const bytes = await readFile(fixture('tiny.gguf'))
    // the tensor info: name (u64 length + bytes), n_dims: u32, then ne[0], ne[1]: u64; [64, 2] becomes [48, 2]
    const name = 'blk.0.attn_q.weight'
    const ne0 = bytes.indexOf(name) + name.length + 4
    assert.equal(bytes.readBigUInt64LE(ne0), 64n)
    bytes.writeBigUInt64LE(48n, ne0)
    await writeFile(path, bytes)
    await assert.rejects(openGguf(path), {
      name: 'GgufError',
      message: `${path}: tensor ${name} (Q8_0[48, 2]) has rows of 48 values, not a whole number of 32-value blocks`,
    })
  })

  it('refuses a GGUF version it does not read', async () => {
    const path = join(dir, 'v1.gguf')
    const bytes = await readFile(fixture('tiny.gguf'))
    bytes.writeUInt32LE(1, 4)
    await writeFile(path, bytes)
    await assert.rejects(openGguf(path), {
      name: 'GgufError',
      message: `${path} has GGUF version 1; seedflow reads versions 2 and 3`,
    })
  })
})
