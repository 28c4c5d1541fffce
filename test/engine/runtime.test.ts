import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { createBuilder } from '../../engine/builder.ts'
import { EngineRuntimeError } from '../../engine/errors.ts'
import { Graph } from '../../engine/ir.ts'
import { encodeModel } from '../../engine/onnx.ts'
import { createLocalEngine, createWorkerEngine, type Engine, modelId } from '../../engine/runtime.ts'
import { tensor } from '../../engine/tensor.ts'

/** float32 matmul, int64 argmax and a bool comparison: one output of each kind. */
function smallModel(name = 'small'): Uint8Array {
  const graph = new Graph(name)
  const op = createBuilder(graph)
  const x = op.input('x', 'float32', ['B', 3])
  const w = op.input('w', 'float32', [3, 2])
  const y = op.output(op.MatMul(x, w), 'y')
  op.output(op.ArgMax(y, 1, { keepdims: 0 }), 'best')
  op.output(op.Greater(y, 0), 'positive')
  return encodeModel(graph)
}

const feeds = () => ({
  x: tensor('float32', [2, 3], [1, 2, 3, -1, 0, 1]),
  w: tensor('float32', [3, 2], [1, 0, 0, 1, 1, -1]),
})

/** The same behaviour from both engines. */
for (const [kind, make] of [
  ['local', () => createLocalEngine({ threads: 1 })],
  ['worker', () => createWorkerEngine({ threads: 1 })],
] as const) {
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

    it('hands lent feeds back in the result, with their values', async () => {
      const model = await engine.load(smallModel())
      const out = await engine.run(model, feeds(), { lend: ['x'], fetches: ['y'] })
      assert.deepEqual(Object.keys(out).sort(), ['x', 'y'])
      assert.deepEqual(out.x, feeds().x)
      await assert.rejects(engine.run(model, { ...feeds() }, { lend: ['z'] }), {
        name: 'EngineRuntimeError',
        message: /lent feeds \[z\] are not fed/,
      })
    })
  })
}

describe('worker engine', () => {
  it('moves feed buffers when asked to transfer them', async () => {
    const engine = createWorkerEngine({ threads: 1 })
    try {
      const model = await engine.load(smallModel())
      const f = feeds()
      await engine.run(model, f, { transfer: true })
      assert.equal(f.x.data.byteLength, 0, 'the caller no longer holds the transferred buffer')
    } finally {
      await engine.close()
    }
  })

  it('moves lent feeds to its thread and back instead of copying them', async () => {
    const engine = createWorkerEngine({ threads: 1 })
    try {
      const model = await engine.load(smallModel())
      const x = new Float32Array(8)
      x.set([1, 2, 3, -1, 0, 1])
      const f = { x: tensor('float32', [2, 3], x.subarray(0, 6)), w: feeds().w }
      const pending = engine.run(model, f, { lend: ['x'], fetches: ['y'] })
      assert.equal(x.byteLength, 0, 'lent: detached here during the run')
      assert.equal(f.w.data.byteLength, 24, 'not lent: copied')
      const out = await pending
      const back = out.x?.data as Float32Array
      assert.equal(back.buffer.byteLength, 32, 'the whole buffer came back, not only the view that was fed')
      assert.deepEqual(back, Float32Array.of(1, 2, 3, -1, 0, 1))
      assert.deepEqual(out.y?.data, Float32Array.of(4, -1, 0, -1))
    } finally {
      await engine.close()
    }
  })
})

/** ~30 chained 1024² MatMuls: long enough (hundreds of ms on one thread) to starve a blocked event loop. */
function longModel(): Uint8Array {
  const graph = new Graph('long')
  const op = createBuilder(graph)
  const w = op.input('w', 'float32', [1024, 1024])
  let h = op.input('x', 'float32', [1024, 1024])
  for (let i = 0; i < 30; i++) h = op.Tanh(op.MatMul(h, w))
  op.output(op.ReduceSum(h, undefined, { keepdims: 0 }), 'out')
  return encodeModel(graph)
}

/** Runs `work` while a 50 ms interval ticks; returns the largest lateness of a tick and the work's duration. */
async function tickDuring(work: () => Promise<unknown>): Promise<{ worstLateMs: number; ranMs: number }> {
  const period = 50
  let last = performance.now()
  let worst = 0
  const timer = setInterval(() => {
    const now = performance.now()
    worst = Math.max(worst, now - last - period)
    last = now
  }, period)
  const started = performance.now()
  await work()
  const ranMs = performance.now() - started
  clearInterval(timer)
  worst = Math.max(worst, performance.now() - last - period)
  return { worstLateMs: worst, ranMs }
}

describe('event loop during a long run', () => {
  const bytes = longModel()
  const big = () => ({
    x: tensor('float32', [1024, 1024], new Float32Array(1024 * 1024).fill(0.001)),
    w: tensor('float32', [1024, 1024], new Float32Array(1024 * 1024).fill(0.001)),
  })

  // Lateness is judged against the run's own length, so that a loaded machine (slower runs, noisier timers) does not
  // flip the verdict: the local engine blocks the loop for about the whole run, the worker engine for none of it.
  it('stays responsive with the worker engine: timers are late by far less than the run lasts', async () => {
    const engine = createWorkerEngine({ threads: 1 })
    try {
      const model = await engine.load(bytes)
      const { worstLateMs, ranMs } = await tickDuring(() => engine.run(model, big(), { transfer: true }))
      assert.ok(ranMs > 200, `the run must outlast several ticks to prove anything (ran ${ranMs.toFixed(0)} ms)`)
      assert.ok(
        worstLateMs < Math.max(50, ranMs / 5),
        `timer was ${worstLateMs.toFixed(1)} ms late during a ${ranMs.toFixed(0)} ms run`,
      )
    } finally {
      await engine.close()
    }
  })

  it('is blocked by the local engine (why the worker exists)', async () => {
    const engine = createLocalEngine({ threads: 1 })
    try {
      const model = await engine.load(bytes)
      const { worstLateMs, ranMs } = await tickDuring(() => engine.run(model, big()))
      assert.ok(
        worstLateMs > ranMs / 2,
        `timer was only ${worstLateMs.toFixed(1)} ms late during a ${ranMs.toFixed(0)} ms run`,
      )
    } finally {
      await engine.close()
    }
  })
})
