import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { gradients } from '../../engine/autodiff.ts'
import { createBuilder } from '../../engine/builder.ts'
import { Graph, type Value } from '../../engine/ir.ts'
import { encodeModel } from '../../engine/onnx.ts'
import { createLocalEngine } from '../../engine/runtime.ts'
import { tensor } from '../../engine/tensor.ts'

const engine = createLocalEngine({ threads: 1 })
after(() => engine.close())

/** Two stacked blocks h ← h + tanh(h·W)·exp(h·W), each optionally a recompute region; loss Σ h². */
function build(recompute: boolean) {
  const graph = new Graph('recompute')
  const op = createBuilder(graph)
  const x = op.input('x', 'float64', ['N', 4])
  const w = op.input('w', 'float64', [4, 4])
  const internals: Value[] = []
  let h = x
  for (let b = 0; b < 2; b++) {
    const block = () => {
      const z = op.MatMul(h, w)
      const t = op.Tanh(z)
      const e = op.Exp(z)
      internals.push(z, t, e)
      return op.Add(h, op.Mul(t, e))
    }
    h = op.block(`block${b}`, block, recompute ? { recompute: [h] } : {})
  }
  const loss = op.output(op.ReduceSum(op.Mul(h, h), undefined, { keepdims: 0 }), 'loss')
  const forwardNodes = graph.nodes.length
  gradients(op, loss, [x, w])
  const inside = new Set(internals.map((v) => v.id))
  // backward nodes that read a value computed inside a block during the forward pass
  const readers = graph.nodes.slice(forwardNodes).filter((n) => n.inputs.some((v) => v && inside.has(v.id)))
  return { graph, readers }
}

const feeds = {
  x: tensor('float64', [3, 4], [0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 0.05, -0.15, 0.25]),
  w: tensor(
    'float64',
    [4, 4],
    Array.from({ length: 16 }, (_, i) => Math.sin(i + 1) * 0.5),
  ),
}

describe('recompute regions', () => {
  it('give the same loss and gradients as keeping the forward values', async () => {
    const plain = await engine.run(await engine.load(encodeModel(build(false).graph)), feeds)
    const again = await engine.run(await engine.load(encodeModel(build(true).graph)), feeds)
    for (const name of ['loss', 'x_grad', 'w_grad'])
      assert.deepEqual(
        Array.from(again[name]!.data as Float64Array),
        Array.from(plain[name]!.data as Float64Array),
        name,
      )
  })

  it('leave no forward value inside a region to the backward pass', () => {
    const { graph, readers } = build(true)
    assert.equal(graph.blocks.length, 2)
    assert.deepEqual(
      readers.map((n) => n.name),
      [],
    )
    // without regions the backward pass does read them (so the check above can fail)
    assert.ok(build(false).readers.length > 0)
  })
})
