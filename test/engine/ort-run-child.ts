// A child process for ort-telemetry.test.ts: loads the engine, runs a one-node graph on the calling thread and
// in a worker thread, prints its pid and exits.
import { createBuilder } from '../../engine/builder.ts'
import { Graph } from '../../engine/ir.ts'
import { encodeModel } from '../../engine/onnx.ts'
import { createLocalEngine, createWorkerEngine } from '../../engine/runtime.ts'
import { tensor } from '../../engine/tensor.ts'

const graph = new Graph('tiny')
const op = createBuilder(graph)
op.output(op.Neg(op.input('x', 'float32', [2])), 'y')
const bytes = encodeModel(graph)

for (const engine of [createLocalEngine({ threads: 1 }), createWorkerEngine({ threads: 1 })]) {
  const model = await engine.load(bytes)
  const out = await engine.run(model, { x: tensor('float32', [2], [1, -2]) })
  if (Array.from(out.y?.data as Float32Array).join(',') !== '-1,2') throw new Error('Neg gave a wrong answer')
  await engine.close()
}
process.stdout.write(`${process.pid}\n`)
