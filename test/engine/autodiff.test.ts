import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { gradients } from '../../engine/autodiff.ts'
import { createBuilder } from '../../engine/builder.ts'
import { GradientError, UnsupportedGradientError } from '../../engine/errors.ts'
import { Graph } from '../../engine/ir.ts'
import { encodeModel } from '../../engine/onnx.ts'
import { createLocalEngine } from '../../engine/runtime.ts'
import { tensor } from '../../engine/tensor.ts'

const engine = createLocalEngine({ threads: 1 })
after(() => engine.close())

function setup() {
  const graph = new Graph('t')
  const op = createBuilder(graph)
  const x = op.input('x', 'float64', [3])
  return { graph, op, x }
}

const X = tensor('float64', [3], [0.5, -1, 2])

async function run(graph: Graph) {
  return engine.run(await engine.load(encodeModel(graph)), { x: X })
}

describe('reverse-mode walk', () => {
  it('throws naming the op when a node on the path has no gradient rule', () => {
    const { op, x } = setup()
    const [y] = op.customOp('Erf', [x], [{ dtype: 'float64', shape: [3] }])
    const loss = op.ReduceSum(y!, undefined, { keepdims: 0 })
    assert.throws(() => gradients(op, loss, [x]), new UnsupportedGradientError('Erf', 'Erf_0'))
    assert.throws(() => gradients(op, loss, [x]), { message: 'Erf: no gradient rule (node Erf_0)' })
  })

  it('throws naming the op when a rule does not cover these attributes (Slice with step 2)', () => {
    const { op, x } = setup()
    const loss = op.ReduceSum(op.Slice(x, [0], [3], [0], [2]))
    assert.throws(() => gradients(op, loss, [x]), {
      name: 'UnsupportedGradientError',
      message: /^Slice: gradient only for step 1/,
    })
  })

  it('sums gradient contributions over fan-out', async () => {
    const { graph, op, x } = setup()
    // L = Σx + Σ(3x) + Σ(x·x): dL/dx = 1 + 3 + 2x
    const sum = (v: typeof x) => op.ReduceSum(v, undefined, { keepdims: 0 })
    const loss = op.output(op.Add(op.Add(sum(x), sum(op.Mul(x, 3))), sum(op.Mul(x, x))), 'loss')
    gradients(op, loss, [x])
    const out = await run(graph)
    assert.deepEqual(Array.from(out.x_grad!.data as Float64Array), [5, 2, 8])
  })

  it('names gradients after their primal and returns forward and backward outputs from one graph', async () => {
    const { graph, op, x } = setup()
    const h = op.named(op.Exp(x), 'h')
    const loss = op.output(op.ReduceSum(op.Mul(h, h), undefined, { keepdims: 0 }), 'loss')
    const [g] = gradients(op, loss, [x])
    assert.equal(g!.name, 'x_grad')
    assert.ok(graph.hasName('h_grad'), 'the intermediate gradient of h is named h_grad')
    assert.deepEqual(
      graph.outputs.map((v) => v.name),
      ['loss', 'x_grad'],
    )
    const out = await run(graph)
    const expected = [0.5, -1, 2].map((v) => 2 * Math.exp(2 * v))
    assert.equal(Number(out.loss!.data[0]).toFixed(9), expected.reduce((a, b) => a + b / 2, 0).toFixed(9))
    for (const [i, e] of expected.entries()) assert.ok(Math.abs(Number(out.x_grad!.data[i]) - e) < 1e-12)
  })

  it('stopGradient treats its input as a constant', async () => {
    const { graph, op, x } = setup()
    // L = Σ stop(x)·x: dL/dx = x, not 2x
    const loss = op.output(op.ReduceSum(op.Mul(op.stopGradient(x), x), undefined, { keepdims: 0 }), 'loss')
    gradients(op, loss, [x])
    assert.deepEqual(Array.from((await run(graph)).x_grad!.data as Float64Array), [0.5, -1, 2])
  })

  it('a value that reaches the loss only through non-differentiable ops is an error unless allowed', async () => {
    const { graph, op, x } = setup()
    const w = op.input('w', 'float64', [3])
    // ArgMax(x) picks an element of w: the loss depends on x only through an integer
    const loss = op.output(op.ReduceSum(op.Gather(w, op.ArgMax(x, 0, { keepdims: 1 }))), 'loss')
    assert.throws(() => gradients(op, loss, [x], { outputs: false }), {
      name: 'GradientError',
      message: 'x: float64[3] does not reach loss loss through differentiable ops',
    })
    const [gx, gw] = gradients(op, loss, [x, w], { allowUnused: true })
    assert.deepEqual([gx!.name, gw!.name], ['x_grad', 'w_grad'])
    const out = await engine.run(await engine.load(encodeModel(graph)), { x: X, w: tensor('float64', [3], [1, 2, 3]) })
    assert.deepEqual(Array.from(out.x_grad!.data as Float64Array), [0, 0, 0])
    assert.deepEqual(Array.from(out.w_grad!.data as Float64Array), [0, 0, 1])
  })

  it('refuses gradients with respect to integer values', () => {
    const { op } = setup()
    const i = op.input('i', 'int64', [2])
    const loss = op.ReduceSum(op.Cast(i, 'float64'))
    assert.throws(
      () => gradients(op, loss, [i]),
      new GradientError('gradient with respect to i: int64[2]: only float values have gradients'),
    )
  })
})
