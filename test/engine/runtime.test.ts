import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { createBuilder } from '../../engine/builder.ts'
import { Graph } from '../../engine/ir.ts'
import { createNativeEngine } from '../../engine/native-engine.ts'
import { encodeModel } from '../../engine/onnx.ts'
import { createLocalEngine, createWorkerEngine } from '../../engine/runtime.ts'
import { tensor } from '../../engine/tensor.ts'
import { ensureNativeAddon } from '../../infra/native.ts'
import { engineConformance, feeds, smallModel } from './conformance.ts'

const addon = ensureNativeAddon()

for (const [kind, make] of [
  ['local', () => createLocalEngine({ threads: 1 })],
  ['worker', () => createWorkerEngine({ threads: 1 })],
  ['native', () => createNativeEngine({ threads: 1, addon })],
] as const)
  engineConformance(kind, make)

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
