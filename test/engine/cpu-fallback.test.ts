// The CPU-fallback guard's decision (engine/cpu-fallback.ts), from a placement as ORT's verbose log gives it. The
// guard against a real device provider (WebGPU over software Vulkan) is in test/integration/cpu-fallback.test.ts.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { createBuilder } from '../../engine/builder.ts'
import { CpuFallbackError, readModelProto, refusedCpuNodes, shapeComputation } from '../../engine/cpu-fallback.ts'
import { isFloat } from '../../engine/dtype.ts'
import { constTensor, Graph } from '../../engine/ir.ts'
import { encodeModel } from '../../engine/onnx.ts'
import { parsePlacement } from '../../engine/placement.ts'
import { PRESETS } from '../../policy/config.ts'
import { LORA_TARGETS } from '../../policy/lora.ts'
import { meanNll } from '../../policy/losses.ts'
import { buildDecodeGraph, buildTrainGraph } from '../../policy/model.ts'
import { TRAINER_OPTIMIZER } from '../../policy/trainer.ts'

/** A verbose placement log: `device` nodes on the device provider, `cpu` nodes on the CPU. */
function log(device: string[][], cpu: string[][]): string {
  const at = '2026-12-05 05:00:00.0 [V:onnxruntime:, session_state.cc:1382 VerifyEachNodeIsAssignedToAnEp]'
  const block = (ep: string, nodes: string[][]) => [
    `${at}  Node(s) placed on [${ep}]. Number of nodes: ${nodes.length}`,
    ...nodes.map(([op, name]) => `${at}   ${op} (${name})`),
  ]
  return [...block('CUDAExecutionProvider', device), ...block('CPUExecutionProvider', cpu)].join('\n')
}

/**
 * x (float, B × T) reshaped by its own shape; the int64 `positions` input offset by T; a float mixed with a shape.
 * Returns the graph and its nodes' names (a node's first output is named as the node).
 */
function shapeGraph() {
  const graph = new Graph('shapes')
  const op = createBuilder(graph)
  const x = op.input('x', 'float32', ['B', 'T'])
  const positions = op.input('positions', 'int64', ['B'])
  const shapeX = op.Shape(x)
  const T = op.Gather(shapeX, op.constant(constTensor('int64', [], [1])))
  const T1 = op.Unsqueeze(T, [0])
  const dims = op.Concat([op.constant(constTensor('int64', [1], [-1])), T1], 0)
  const mm = op.MatMul(x, op.input('w', 'float32', ['T', 'T']))
  const r = op.Reshape(mm, dims)
  const offset = op.Add(positions, T)
  const Tf = op.Cast(T, 'float32')
  const scaled = op.Mul(x, Tf)
  const names = { shapeX, T, T1, dims, mm, r, offset, Tf, scaled }
  const n = Object.fromEntries(Object.entries(names).map(([k, v]) => [k, v.name])) as Record<keyof typeof names, string>
  op.output(r, 'y')
  op.output(offset, 'p')
  op.output(scaled, 's')
  return { graph, n }
}

describe('engine/cpu-fallback', () => {
  it('takes shape computation for what it is: Shape, and nodes on shapes, small constants and index inputs', async () => {
    const { graph, n } = shapeGraph()
    const shape = shapeComputation(await readModelProto(encodeModel(graph)))
    for (const name of [n.shapeX, n.T, n.T1, n.dims, n.offset, n.Tf]) assert.ok(shape.has(name), name)
    for (const name of [n.mm, n.r, n.scaled]) assert.ok(!shape.has(name), name) // float data, whatever its shape
  })

  it('allows a placement whose CPU nodes are shape computation, and refuses one that computes on data', async () => {
    const { graph, n } = shapeGraph()
    const model = await readModelProto(encodeModel(graph))
    const device = [
      ['MatMul', n.mm],
      ['Reshape', n.r],
      ['Mul', n.scaled],
    ]
    const shapes = [
      ['Shape', n.shapeX],
      ['Gather', n.T],
      ['Unsqueeze', n.T1],
      ['Concat', n.dims],
      ['Add', n.offset],
      ['Cast', n.Tf],
    ]
    assert.deepEqual(refusedCpuNodes(model, parsePlacement(log(device, shapes))), [])

    const refused = refusedCpuNodes(
      model,
      parsePlacement(log(device.slice(1), [...shapes, ['MatMul', n.mm], ['FusedMatMul', 'fused_7']])),
    )
    assert.deepEqual(
      refused.map((node) => [node.op, node.name]),
      [
        ['MatMul', n.mm],
        ['FusedMatMul', 'fused_7'],
      ],
    )
    assert.match(refused[0]?.reason as string, /computes on data/)
    assert.match(refused[1]?.reason as string, /ORT's optimizer made/)
    const error = new CpuFallbackError('ab'.repeat(32), 'CUDA device 0', refused)
    assert.match(
      error.message,
      /CUDA device 0: ORT placed 2 node\(s\) on the CPU .* MatMul ×1, FusedMatMul ×1: MatMul \(MatMul/,
    )
    assert.match(error.message, /CPU_EXCEPTIONS \(engine\/cpu-fallback\.ts\)/)

    // a listed exception lets its op through
    const excepted = refusedCpuNodes(model, parsePlacement(log(device.slice(1), [...shapes, ['MatMul', n.mm]])), [
      { op: 'MatMul', why: 'test', cost: 'none' },
    ])
    assert.deepEqual(excepted, [])
  })

  it('refuses every node when ORT put them all on the CPU of a device session (its log lists none)', async () => {
    const { graph, n } = shapeGraph()
    const model = await readModelProto(encodeModel(graph))
    const all = parsePlacement(
      '2026-12-05 05:00:00.0 [V:onnxruntime:, session_state.cc:1377 VerifyEachNodeIsAssignedToAnEp]  All nodes placed on [CPUExecutionProvider]. Number of nodes: 9',
    )
    assert.deepEqual(
      refusedCpuNodes(model, all).map((node) => node.name),
      [n.mm, n.r, n.scaled],
    )
  })

  it("puts no node of the product's graphs that reads a weight or a floating-point input among shape computation", async () => {
    // Independently of the rule, on the IR: a value is data when it comes from a floating-point graph input or a
    // weight (> 100 elements), or from a node reading data, except through Shape (which reads only dimensions).
    const c = PRESETS.tiny
    const lora = { rank: 4, alpha: 8, dropout: 0, targets: LORA_TARGETS }
    for (const graph of [
      buildTrainGraph(c, meanNll, 'float32', { lora }, TRAINER_OPTIMIZER),
      buildDecodeGraph(c, 'float32', 'in-graph', { lora }),
    ]) {
      const shape = shapeComputation(await readModelProto(encodeModel(graph)))
      const data = new Set<number>(graph.inputs.filter((v) => isFloat(v.dtype)).map((v) => v.id))
      let checked = 0
      for (const node of graph.nodes) {
        const readsData = node.opType !== 'Shape' && node.inputs.some((x) => x && data.has(x.id))
        const weight =
          node.opType === 'Constant' && node.outputs[0]!.shape.reduce<number>((n, d) => n * Number(d), 1) > 100
        if (readsData || weight) for (const y of node.outputs) data.add(y.id)
        if (shape.has(node.name)) {
          assert.ok(!readsData && !weight, `${graph.name}: ${node.opType} ${node.name} reads data`)
          checked++
        }
      }
      assert.ok(checked > 10, `${graph.name}: ${checked} shape nodes`)
    }
  })
})
