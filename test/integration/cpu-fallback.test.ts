// The CPU-fallback guard against a real device provider without a GPU: ORT's WebGPU provider (bundled in
// onnxruntime-node) over Mesa's software Vulkan (infra/install-vulkan.sh). A model with an op the provider has no
// kernel for (Det) fails to load, naming the op; shape computation that ORT keeps on the CPU on purpose is allowed,
// and the session computes what the CPU does; 'allow' lets the fallback through.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { createBuilder } from '../../engine/builder.ts'
import { CpuFallbackError } from '../../engine/cpu-fallback.ts'
import { Graph } from '../../engine/ir.ts'
import { encodeModel } from '../../engine/onnx.ts'
import { createLocalEngine, createWorkerEngine, type Engine } from '../../engine/runtime.ts'
import { TEST_ENV } from './servers.ts'

/** |det(|x|)| + x reshaped by its own shape: Det has a CPU kernel only (ORT's CUDA and WebGPU providers lack it). */
function detModel(): Uint8Array {
  const graph = new Graph('det')
  const op = createBuilder(graph)
  const x = op.input('x', 'float32', [2, 2])
  const [det] = graph.addNode(null, 'Det', '', [op.Abs(x)], {}, [{ dtype: 'float32', shape: [] }])
  op.output(op.Add(det!, op.Reshape(x, op.Shape(x))), 'y')
  return encodeModel(graph)
}

/** x·w reshaped to (-1, T) from x's own shape, scaled by T: every op has a WebGPU kernel but the shape math. */
function shapeModel(): Uint8Array {
  const graph = new Graph('shape-math')
  const op = createBuilder(graph)
  const x = op.input('x', 'float32', ['B', 'T'])
  const T = op.Gather(op.Shape(x), op.ints([1]))
  const y = op.MatMul(x, op.input('w', 'float32', ['T', 'T']))
  op.output(op.Mul(op.Reshape(y, op.Concat([op.ints([-1]), T], 0)), op.Cast(T, 'float32')), 'y')
  return encodeModel(graph)
}

const feeds = {
  x: { dtype: 'float32', dims: [2, 2], data: new Float32Array([1, -2, 3, 4]) },
  w: { dtype: 'float32', dims: [2, 2], data: new Float32Array([0.5, 1, -1, 2]) },
} as const

describe('the CPU-fallback guard on a device provider (WebGPU over software Vulkan)', () => {
  const engines: Engine[] = []
  const engine = (make: typeof createLocalEngine, cpuFallback?: 'allow') => {
    const e = make({
      executionProviders: [{ name: 'webgpu' }, 'cpu'],
      threads: 1,
      ...(cpuFallback ? { cpuFallback } : {}),
    })
    engines.push(e)
    return e
  }
  before(() => {
    process.env.VK_ICD_FILENAMES = process.env[TEST_ENV.vulkanIcd] // lavapipe, the placement child's too
  })
  after(() => Promise.all(engines.map((e) => e.close())))

  it('refuses a model with an op the provider has no kernel for, naming it, in the worker engine too', async () => {
    for (const make of [createLocalEngine, createWorkerEngine]) {
      await assert.rejects(engine(make).load(detModel()), (error: Error) => {
        assert.equal(error.name, 'CpuFallbackError')
        assert.match(
          error.message,
          /on WebGPU: ORT placed 1 node\(s\) on the CPU that are not shape computation, by op Det ×1: Det \(Det_0/,
        )
        if (error instanceof CpuFallbackError)
          assert.deepEqual(
            error.nodes.map((n) => n.op),
            ['Det'],
          )
        return true
      })
    }
  })

  it("allows ORT's shape computation on the CPU, and the session computes what the CPU does", async () => {
    const cpu = createLocalEngine({ threads: 1 })
    engines.push(cpu)
    const model = shapeModel()
    const [onDevice, onCpu] = await Promise.all([engine(createLocalEngine).load(model), cpu.load(model)])
    const got = await engines.at(-2)!.run(onDevice, feeds)
    const want = await cpu.run(onCpu, feeds)
    assert.deepEqual([...(got.y!.data as Float32Array)], [...(want.y!.data as Float32Array)])
  })

  it("lets the fallback through with cpuFallback 'allow' (a measurement of its cost)", async () => {
    const e = engine(createLocalEngine, 'allow')
    const handle = await e.load(detModel())
    const { y } = await e.run(handle, { x: feeds.x })
    // det(|x|) = 1·4 − 2·3 = −2, added to x
    const got = [...(y as { data: Float32Array }).data]
    const want = [-1, -4, 1, 2]
    assert.ok(
      got.every((v, i) => Math.abs(v - (want[i] as number)) < 1e-5),
      `${got} vs ${want}`,
    )
  })
})
