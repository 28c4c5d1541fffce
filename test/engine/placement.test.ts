import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { createBuilder } from '../../engine/builder.ts'
import { Graph } from '../../engine/ir.ts'
import { encodeModel } from '../../engine/onnx.ts'
import { parsePlacement, placementOf } from '../../engine/placement.ts'

// ORT's verbose lines at session creation, as its log prints them (a mixed placement: two providers)
const MIXED = [
  '2026-12-05 03:00:00.1 [V:onnxruntime:, session_state.cc:1377 VerifyEachNodeIsAssignedToAnEp] Node placements',
  '2026-12-05 03:00:00.1 [V:onnxruntime:, session_state.cc:1380 VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on [CUDAExecutionProvider]. Number of nodes: 2',
  '2026-12-05 03:00:00.1 [V:onnxruntime:, session_state.cc:1382 VerifyEachNodeIsAssignedToAnEp]   MatMul (MatMul_1)',
  '2026-12-05 03:00:00.1 [V:onnxruntime:, session_state.cc:1382 VerifyEachNodeIsAssignedToAnEp]   Add (node_7)',
  '2026-12-05 03:00:00.1 [V:onnxruntime:, session_state.cc:1380 VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on [CPUExecutionProvider]. Number of nodes: 1',
  '2026-12-05 03:00:00.1 [V:onnxruntime:, session_state.cc:1382 VerifyEachNodeIsAssignedToAnEp]   Unique ()',
  '2026-12-05 03:00:00.1 [W:onnxruntime:, session_state.cc:1390 VerifyEachNodeIsAssignedToAnEp] Some nodes were not assigned to the preferred execution providers',
  '2026-12-05 03:00:00.1 [V:onnxruntime:, session_state.cc:1500 FinalizeSessionState] other line',
].join('\n')

describe('engine/placement', () => {
  it('reads the nodes each provider got from the verbose log', () => {
    assert.deepEqual(parsePlacement(MIXED).providers, {
      CUDAExecutionProvider: {
        count: 2,
        nodes: [
          { op: 'MatMul', name: 'MatMul_1' },
          { op: 'Add', name: 'node_7' },
        ],
      },
      CPUExecutionProvider: { count: 1, nodes: [{ op: 'Unique', name: '' }] },
    })
    assert.deepEqual(parsePlacement('no placement here').providers, {})
  })

  it("reads a real session's placement from a child process (the CPU: every node there)", async () => {
    const graph = new Graph('placement')
    const op = createBuilder(graph)
    op.output(op.Abs(op.Add(op.input('x', 'float32', [2]), op.input('y', 'float32', [2]))), 'z')
    const { providers } = await placementOf(encodeModel(graph), ['cpu'])
    assert.deepEqual(providers, { CPUExecutionProvider: { count: 2, nodes: [] } })
  })
})
