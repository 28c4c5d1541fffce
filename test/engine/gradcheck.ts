// Finite-difference checking of gradient rules: the analytic gradients come from the engine's backward graph,
// the numeric ones from central differences of the forward graph, both run in onnxruntime.
import { gradients } from '../../engine/autodiff.ts'
import { type Builder, createBuilder } from '../../engine/builder.ts'
import type { DType } from '../../engine/dtype.ts'
import { Graph, type Value } from '../../engine/ir.ts'
import { encodeModel } from '../../engine/onnx.ts'
import type { Engine } from '../../engine/runtime.ts'
import type { Dim } from '../../engine/shape.ts'
import { type Feeds, type TensorData, tensor } from '../../engine/tensor.ts'

/** Deterministic uniform numbers in [0, 1). */
export function rng(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export interface InputSpec {
  dtype?: DType
  dims: number[]
  /** Declared shape when it differs from `dims` (named or run-time dims). */
  shape?: Dim[]
  /** Fixed values (indices, masks); otherwise uniform in [−1, 1) passed through `domain`. */
  data?: number[]
  /** Maps a uniform draw in [−1, 1) into the op's domain (e.g. positive for Log). */
  domain?: (u: number) => number
  /** Hold this input fixed (no gradient checked). */
  fixed?: boolean
}

export interface GradCase {
  name: string
  inputs: Record<string, InputSpec>
  build: (op: Builder, x: Record<string, Value>) => Value | Value[]
  /** Central-difference step (default 1e-5 for float64, 1e-2 for float32). */
  step?: number
  atol?: number
  rtol?: number
}

export const positive = (u: number) => 0.3 + Math.abs(u) * 1.5
export const awayFromZero = (u: number) => Math.sign(u || 1) * (0.3 + Math.abs(u))

export interface Mismatch {
  input: string
  index: number
  analytic: number
  numeric: number
}

export interface GradcheckResult {
  checked: number
  mismatches: Mismatch[]
}

function makeFeeds(c: GradCase, seed: number): Feeds {
  const next = rng(seed)
  const feeds: Feeds = {}
  for (const [name, spec] of Object.entries(c.inputs)) {
    const dtype = spec.dtype ?? 'float64'
    const n = spec.dims.reduce((a, b) => a * b, 1)
    const values = spec.data ?? Array.from({ length: n }, () => (spec.domain ?? ((u) => u))(next() * 2 - 1))
    feeds[name] = tensor(dtype, spec.dims, values)
  }
  return feeds
}

function buildForward(c: GradCase, graphName: string) {
  const graph = new Graph(graphName)
  const op = createBuilder(graph)
  const x: Record<string, Value> = {}
  for (const [name, spec] of Object.entries(c.inputs))
    x[name] = op.input(name, spec.dtype ?? 'float64', spec.shape ?? spec.dims)
  const ys = [c.build(op, x)].flat()
  return { graph, op, x, ys }
}

/** L = Σ_k Σ y_k ⊙ w_k with fixed random weights, so every output element's gradient is exercised. */
function addLoss(op: Builder, ys: Value[], weights: Value[]): Value {
  const terms = ys.map((y, k) => op.ReduceSum(op.Mul(y, op.Cast(weights[k]!, y.dtype)), undefined, { keepdims: 0 }))
  const lossDtype = terms[0]!.dtype
  return terms.map((t) => op.Cast(t, lossDtype)).reduce((a, b) => op.Add(a, b))
}

export async function gradcheck(engine: Engine, c: GradCase, seed = 1): Promise<GradcheckResult> {
  const feeds = makeFeeds(c, seed)
  const floatInputs = Object.entries(c.inputs)
    .filter(([, s]) => !s.fixed && !s.data && (s.dtype ?? 'float64').startsWith('float'))
    .map(([n]) => n)

  // 1. output dims, for the loss weights
  const probe = buildForward(c, 'probe')
  for (const [k, y] of probe.ys.entries()) probe.op.output(y, `y${k}`)
  const probeModel = await engine.load(encodeModel(probe.graph))
  const outs = await engine.run(probeModel, feeds)
  await engine.release(probeModel)
  const next = rng(seed + 1000)
  const weightFeeds: Feeds = {}
  probe.ys.forEach((_, k) => {
    const dims = outs[`y${k}`]!.dims
    const n = dims.reduce((a, b) => a * b, 1)
    weightFeeds[`w${k}`] = tensor(
      'float64',
      dims,
      Array.from({ length: n }, () => next() * 2 - 1),
    )
  })

  // 2. forward + backward graph, and a forward-only loss graph for the differences
  const build = (withGrad: boolean) => {
    const f = buildForward(c, withGrad ? 'grad' : 'loss')
    const weights = f.ys.map((_, k) => f.op.input(`w${k}`, 'float64', weightFeeds[`w${k}`]!.dims))
    const loss = f.op.output(addLoss(f.op, f.ys, weights), 'loss')
    if (withGrad)
      gradients(
        f.op,
        loss,
        floatInputs.map((n) => f.x[n]!),
      )
    return encodeModel(f.graph)
  }
  const gradModel = await engine.load(build(true))
  const lossModel = await engine.load(build(false))
  const all = { ...feeds, ...weightFeeds }
  const analytic = await engine.run(gradModel, all)

  const lossAt = async (name: string, i: number, value: number): Promise<{ loss: number; actual: number }> => {
    const t = all[name]!
    const data = (t.data as Float64Array | Float32Array).slice()
    data[i] = value
    const out = await engine.run(lossModel, { ...all, [name]: { ...t, data } as TensorData }, { fetches: ['loss'] })
    return { loss: Number(out.loss!.data[0]), actual: data[i]! }
  }

  const mismatches: Mismatch[] = []
  let checked = 0
  for (const name of floatInputs) {
    const t = all[name]!
    const dtype = t.dtype
    const h = c.step ?? (dtype === 'float64' ? 1e-5 : 1e-2)
    const atol = c.atol ?? (dtype === 'float64' ? 1e-6 : 2e-2)
    const rtol = c.rtol ?? (dtype === 'float64' ? 1e-5 : 2e-2)
    const grad = analytic[`${name}_grad`]!
    for (let i = 0; i < t.data.length; i++) {
      const x0 = Number(t.data[i])
      const plus = await lossAt(name, i, x0 + h)
      const minus = await lossAt(name, i, x0 - h)
      // divide by the step actually represented (float32 rounds x ± h)
      const numeric = (plus.loss - minus.loss) / (plus.actual - minus.actual)
      const a = Number(grad.data[i])
      checked++
      if (!(Math.abs(a - numeric) <= atol + rtol * Math.abs(numeric)))
        mismatches.push({ input: name, index: i, analytic: a, numeric })
    }
  }
  await engine.release(gradModel)
  await engine.release(lossModel)
  return { checked, mismatches }
}
