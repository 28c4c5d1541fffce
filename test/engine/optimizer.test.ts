import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  AdamW,
  clipGradNorm,
  constantLr,
  cosineWithWarmup,
  globalNorm,
  OptimizerError,
} from '../../engine/optimizer.ts'

const close = (actual: ArrayLike<number>, expected: number[], tol = 1e-12) => {
  assert.equal(actual.length, expected.length)
  for (let i = 0; i < expected.length; i++) {
    assert.ok(Math.abs(actual[i]! - expected[i]!) <= tol, `[${i}]: ${actual[i]} vs ${expected[i]}`)
  }
}

describe('AdamW', () => {
  it('first step: bias correction makes the update lr·sign(g), after decay p·(1 − lr·λ)', () => {
    // m̂ = g, v̂ = g² at t = 1: p0 = 1·0.999 − 0.1·0.5/(0.5 + 1e-8), p1 = −2·0.999 + 0.1·0.1/(0.1 + 1e-8)
    const p = { w: Float64Array.of(1, -2) }
    const opt = new AdamW({ beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01 })
    opt.step(p, { w: [0.5, -0.1] }, 0.1)
    close(p.w, [0.999 - 0.05 / (0.5 + 1e-8), -1.998 + 0.01 / (0.1 + 1e-8)])
  })

  it('second step matches an independent scalar computation', () => {
    // expected values computed separately (Python, float64) from the AdamW update with bias correction
    const p = { w: Float64Array.of(1, -2) }
    const opt = new AdamW({ weightDecay: 0.01 })
    opt.step(p, { w: [0.5, -0.1] }, 0.1)
    opt.step(p, { w: [0.2, 0.3] }, 0.1)
    close(p.w, [0.8082434839009282, -1.9455209911100655])
    close(opt.state().tensors['w.exp_avg']!, [0.065, 0.021])
    close(opt.state().tensors['w.exp_avg_sq']!, [0.00028975, 9.999e-5])
  })

  it('noDecay parameters skip weight decay', () => {
    const p = { scale: Float64Array.of(1), w: Float64Array.of(1) }
    new AdamW({ weightDecay: 0.5, noDecay: (n) => n === 'scale' }).step(p, { scale: [0], w: [0] }, 0.1)
    close(p.scale, [1])
    close(p.w, [0.95])
  })

  it('state round-trips: a restored optimizer continues exactly', () => {
    const a = { w: Float32Array.of(0.3, -0.7, 1.1) }
    const b = { w: a.w.slice() }
    const grads = [
      [0.1, 0.2, -0.3],
      [0.05, -0.4, 0.2],
      [-0.2, 0.1, 0.1],
    ]
    const opt = new AdamW()
    opt.step(a, { w: grads[0]! }, 0.01)
    b.w.set(a.w)
    const restored = new AdamW({}, opt.state())
    assert.equal(restored.stepCount, 1)
    for (const g of grads.slice(1)) {
      opt.step(a, { w: g }, 0.01)
      restored.step(b, { w: g }, 0.01)
    }
    assert.deepEqual(Array.from(b.w), Array.from(a.w))
  })

  it('gradScale reads every gradient as scale · g: the same update as clipping first', () => {
    const grads = { w: Float64Array.of(3, -4, 0.5), b: Float64Array.of(2) }
    const a = { w: Float64Array.of(0.3, -0.7, 1.1), b: Float64Array.of(0.2) }
    const b = { w: a.w.slice(), b: a.b.slice() }
    const first = new AdamW({ weightDecay: 0.1 })
    const second = new AdamW({ weightDecay: 0.1 })
    for (let step = 0; step < 3; step++) {
      const clipped = { w: grads.w.slice(), b: grads.b.slice() }
      const { scale } = clipGradNorm(clipped, 1)
      first.step(a, clipped, 0.01)
      second.step(b, grads, 0.01, scale)
    }
    close(b.w, Array.from(a.w), 1e-15)
    close(b.b, Array.from(a.b), 1e-15)
    assert.throws(() => second.step(b, grads, 0.01, Number.NaN), /gradient scale must be finite/)
  })

  it('rejects a missing gradient, naming the parameter', () => {
    assert.throws(
      () => new AdamW().step({ w: new Float32Array(2), b: new Float32Array(1) }, { w: [0, 0] }, 0.1),
      new OptimizerError('AdamW: no gradient for parameter b'),
    )
  })
})

describe('clipGradNorm', () => {
  it('scales every tensor by maxNorm / global norm when above it', () => {
    const g = { a: Float64Array.of(3, 0), b: Float64Array.of(0, 4) } // norm 5
    const { norm, scale } = clipGradNorm(g, 1)
    assert.equal(norm, 5)
    close([scale], [1 / (5 + 1e-6)])
    close([globalNorm(g)], [1], 1e-6)
    close(g.a, [3 * scale, 0])
  })

  it('leaves gradients under the limit unchanged', () => {
    const g = { a: Float64Array.of(0.3, 0.4) }
    assert.deepEqual(clipGradNorm(g, 1), { norm: 0.5, scale: 1 })
    close(g.a, [0.3, 0.4])
  })
})

describe('learning-rate schedules', () => {
  it('constant', () => {
    assert.deepEqual([0, 10, 1000].map(constantLr(3e-4)), [3e-4, 3e-4, 3e-4])
  })

  it('cosine with warm-up: linear ramp, peak, half-way, floor', () => {
    const lr = cosineWithWarmup({ peakLr: 1, warmupSteps: 4, totalSteps: 14, minLr: 0.1 })
    close([0, 1, 3].map(lr), [0.25, 0.5, 1])
    close([lr(4)], [1]) // decay starts at the peak
    close([lr(9)], [0.1 + 0.9 * 0.5]) // half-way through the decay: cos(π/2) = 0
    close([lr(14), lr(100)], [0.1, 0.1])
  })
})
