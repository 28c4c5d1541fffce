// The engines' conformance suite: the same behaviour from every engine (local, worker, native on the CPU here;
// the native engine with its tensors in a device's memory in test/integration/native-device.test.ts).
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { createBuilder } from '../../engine/builder.ts'
import { EngineRuntimeError } from '../../engine/errors.ts'
import { Graph } from '../../engine/ir.ts'
import { writeModelFiles } from '../../engine/model-files.ts'
import { encodeModel } from '../../engine/onnx.ts'
import { type Engine, modelId } from '../../engine/runtime.ts'
import { tensor } from '../../engine/tensor.ts'

/** float32 matmul, int64 argmax and a bool comparison: one output of each kind. */
export function smallModel(name = 'small'): Uint8Array {
  const graph = new Graph(name)
  const op = createBuilder(graph)
  const x = op.input('x', 'float32', ['B', 3])
  const w = op.input('w', 'float32', [3, 2])
  const y = op.output(op.MatMul(x, w), 'y')
  op.output(op.ArgMax(y, 1, { keepdims: 0 }), 'best')
  op.output(op.Greater(y, 0), 'positive')
  return encodeModel(graph)
}

export const feeds = () => ({
  x: tensor('float32', [2, 3], [1, 2, 3, -1, 0, 1]),
  w: tensor('float32', [3, 2], [1, 0, 0, 1, 1, -1]),
})

/** The suite, for an engine of this kind. */
export function engineConformance(kind: string, make: () => Engine): void {
  describe(`${kind} engine`, () => {
    const engine: Engine = make()
    after(() => engine.close())

    it('runs a model with typed feeds and fetches', async () => {
      const model = await engine.load(smallModel())
      assert.deepEqual(model.inputNames, ['x', 'w'])
      const out = await engine.run(model, feeds())
      assert.deepEqual(out.y, { dtype: 'float32', dims: [2, 2], data: Float32Array.of(4, -1, 0, -1) })
      assert.deepEqual(out.best, { dtype: 'int64', dims: [2], data: BigInt64Array.of(0n, 0n) })
      assert.deepEqual(out.positive, { dtype: 'bool', dims: [2, 2], data: Uint8Array.of(1, 0, 0, 0) })
    })

    it('returns only the requested fetches', async () => {
      const model = await engine.load(smallModel())
      assert.deepEqual(Object.keys(await engine.run(model, feeds(), { fetches: ['best'] })), ['best'])
    })

    it('keys sessions by the sha256 of the model bytes', async () => {
      const bytes = smallModel()
      const a = await engine.load(bytes)
      const b = await engine.load(smallModel())
      assert.equal(a.id, modelId(bytes))
      assert.equal(a.id, b.id)
    })

    it('names missing and unknown feeds', async () => {
      const model = await engine.load(smallModel())
      await assert.rejects(engine.run(model, { x: feeds().x, v: feeds().w }), {
        name: 'EngineRuntimeError',
        message: `model ${model.id.slice(0, 12)}: missing feeds [w], unknown feeds [v]`,
      })
    })

    it('shares one session between identical loads and drops it after the last release', async () => {
      const bytes = smallModel(`refcounted-${kind}`)
      const first = await engine.load(bytes)
      const second = await engine.load(bytes)
      assert.equal(first.id, second.id)
      await engine.release(first)
      assert.ok((await engine.run(second, feeds())).y, 'still loaded: one reference left')
      await engine.release(second)
      await assert.rejects(engine.run(second, feeds()), EngineRuntimeError)
    })

    it('feeds kept tensors by name until they are forgotten', async () => {
      const model = await engine.load(smallModel())
      const kept = await engine.keep({ w: feeds().w })
      assert.deepEqual(kept.names, ['w'])
      const out = await engine.run(model, { x: feeds().x }, { kept })
      assert.deepEqual(out.y?.data, Float32Array.of(4, -1, 0, -1))
      await assert.rejects(engine.run(model, feeds(), { kept }), {
        name: 'EngineRuntimeError',
        message: 'feeds [w] are both kept and fed',
      })
      await engine.forget(kept)
      await assert.rejects(engine.run(model, { x: feeds().x }, { kept }), {
        name: 'EngineRuntimeError',
        message: /kept feeds \d+ are not in this engine/,
      })
    })

    it('keeps state that runs read by rows and write into, in place or by slices', async () => {
      const model = await engine.load(stateModel())
      const cache = await engine.allocate({ state: { dtype: 'float32', dims: [3, 2, 4] } })
      const x = (rows: number, v: number[]) => ({ x: tensor('float32', [rows, 2, 1], v) })
      // rows [0, 2) are read (zeros): sum = x, written to row 2 at column 1 and to row 0 at column 3
      const slices = [
        { from: 0, row: 2, at: 1 },
        { from: 1, row: 0, at: 3 },
      ]
      const out = await engine.run(model, x(2, [1, 2, 3, 4]), {
        kept: { ...cache, rows: 2 },
        fetches: ['sum'],
        writes: { sum: { kept: cache, name: 'state', axis: 2, slices } },
      })
      assert.deepEqual(out, {}, 'a written output is not returned')
      // every row + 10, in place
      await engine.run(model, x(3, [10, 10, 10, 10, 10, 10]), {
        kept: cache,
        fetches: ['bumped'],
        inPlace: { bumped: 'state' },
      })
      const state = await engine.run(model, x(3, [0, 0, 0, 0, 0, 0]), { kept: cache, fetches: ['bumped'] })
      const got = state.bumped?.data as Float32Array
      assert.deepEqual([...got], [10, 10, 10, 13, 10, 10, 10, 14, ...Array(8).fill(10), 10, 11, 10, 10, 10, 12, 10, 10])
      const wrong = (at: number) => ({
        sum: { kept: cache, name: 'state', axis: 2, slices: [{ from: 0, row: 0, at }] },
      })
      await assert.rejects(
        engine.run(model, x(3, [0, 0, 0, 0, 0, 0]), { kept: cache, fetches: ['sum'], writes: wrong(4) }),
        {
          name: 'EngineRuntimeError',
          message: 'output sum into kept tensor state: 1 at 4 exceed the 4 along axis 2',
        },
      )
      await assert.rejects(engine.run(model, x(4, Array(8).fill(0)), { kept: { ...cache, rows: 4 } }), {
        name: 'EngineRuntimeError',
        message: 'kept tensor state: 4 rows asked, it has 3',
      })
      await assert.rejects(
        engine.run(
          model,
          { ...x(1, [0, 0]), state: tensor('float32', [1, 2, 4], Array(8).fill(0)) },
          { inPlace: { bumped: 'state' } },
        ),
        { name: 'EngineRuntimeError', message: /output bumped in place of state, not a kept feed/ },
      )
      await engine.forget(cache)
    })

    it('loads a model whose initializers lie in a data file beside it, the same as one with them inside', async () => {
      const graph = new Graph(`external-${kind}`)
      const op = createBuilder(graph)
      const x = op.input('x', 'float32', ['B', 3])
      const w = op.input('w', 'float32', [3, 2])
      op.output(op.MatMul(x, w), 'y')
      const weights = { w: { dtype: 'float32' as const, dims: [3, 2], data: feeds().w.data } }
      const inside = await engine.load(encodeModel(graph, { initializers: weights }))
      const dir = mkdtempSync(join(tmpdir(), 'seedflow-external-'))
      const file = writeModelFiles(graph, weights, dir)
      try {
        const beside = await engine.load(file)
        assert.equal(beside.id, file.id)
        assert.deepEqual(beside.inputNames, ['x'])
        const x = { x: feeds().x }
        assert.deepEqual(await engine.run(beside, x), await engine.run(inside, x))
      } finally {
        file.remove()
        rmSync(dir, { recursive: true, force: true })
      }
    })

    it('reads copies of kept tensors back, all or by name', async () => {
      const kept = await engine.keep({ w: feeds().w, x: feeds().x })
      const all = await engine.read(kept)
      assert.deepEqual(Object.keys(all), ['w', 'x'])
      assert.deepEqual(all.w, feeds().w)
      ;(all.w!.data as Float32Array).fill(-1)
      const again = await engine.read(kept, ['w'])
      assert.deepEqual(Object.keys(again), ['w'])
      assert.equal((again.w!.data as Float32Array)[0], 1, 'what read returns is a copy')
      await assert.rejects(engine.read(kept, ['nope']), { name: 'EngineRuntimeError', message: /hold no tensor nope/ })
      await engine.forget(kept)
    })
  })
}

/** A (B, 2, 4) state and a (B, 2, 1) input: `sum` = the state summed over its last axis + x, `bumped` = state + x. */
function stateModel(): Uint8Array {
  const graph = new Graph('state')
  const op = createBuilder(graph)
  const state = op.input('state', 'float32', ['B', 2, 4])
  const x = op.input('x', 'float32', ['B', 2, 1])
  op.output(op.Add(op.ReduceSum(state, [2], { keepdims: 1 }), x), 'sum')
  op.output(op.Add(state, x), 'bumped')
  return encodeModel(graph)
}
