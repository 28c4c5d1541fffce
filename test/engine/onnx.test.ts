import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { describe, it } from 'node:test'
import { fromBinary } from '@bufbuild/protobuf'
import { ModelProtoSchema } from 'onnx-buf'
import { gradients } from '../../engine/autodiff.ts'
import { createBuilder } from '../../engine/builder.ts'
import { Graph } from '../../engine/ir.ts'
import { encodeModel, IR_VERSION, OPSET } from '../../engine/onnx.ts'

function buildModel(): Uint8Array {
  const graph = new Graph('mlp')
  const op = createBuilder(graph)
  const x = op.input('x', 'float32', ['B', 8])
  const w = op.input('w', 'float32', [8, 4])
  const h = op.named(op.Sigmoid(op.MatMul(x, w)), 'h')
  op.Exp(h) // not used by any output: left out of the model
  const loss = op.output(op.ReduceMean(op.LogSoftmax(h, -1), undefined, { keepdims: 0 }), 'loss')
  gradients(op, loss, [w])
  return encodeModel(graph)
}

describe('ONNX encoding', () => {
  it('is deterministic: the same graph built twice gives the same bytes', () => {
    const a = buildModel()
    const b = buildModel()
    assert.equal(createHash('sha256').update(a).digest('hex'), createHash('sha256').update(b).digest('hex'))
    assert.deepEqual(a, b)
  })

  it('writes opset 23, IR version 11, named dims and only live nodes', () => {
    const model = fromBinary(ModelProtoSchema, buildModel())
    assert.equal(model.irVersion, BigInt(IR_VERSION))
    assert.deepEqual(
      model.opsetImport.map((o) => [o.domain, Number(o.version)]),
      [['', OPSET]],
    )
    assert.equal(OPSET, 23)
    assert.equal(IR_VERSION, 11)
    const graph = model.graph!
    assert.deepEqual(
      graph.input.map((i) => i.name),
      ['x', 'w'],
    )
    assert.deepEqual(
      graph.output.map((o) => o.name),
      ['loss', 'w_grad'],
    )
    const xDims = graph.input[0]!.type!.value.value!
    assert.ok('shape' in xDims)
    assert.deepEqual(
      xDims.shape!.dim.map((d) => d.value.value),
      ['B', 8n],
    )
    assert.ok(!graph.node.some((n) => n.opType === 'Exp' && n.input[0] === 'h'), 'dead node left out')
    assert.ok(graph.initializer.length === 0, 'weights are inputs, not initializers')
  })
})
