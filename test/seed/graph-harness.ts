// Runs a loss subgraph on a Batch with the local engine, and checks its gradient with respect to `s` against
// central finite differences while holding every stop-gradient quantity fixed at its value at the base point.
import {
  type Builder,
  createBuilder,
  type DType,
  type Engine,
  encodeModel,
  Graph,
  gradients,
  type TensorData,
  tensor,
  type Value,
} from '../../engine/index.ts'
import type { Batch } from './reference-losses.ts'

export interface Inputs {
  s: Value
  old: Value
  ref: Value
  teacher: Value
  control: Value
  adv: Value
  mask: Value
  entropy: Value
  sampleMask: Value
}

export type Build = (op: Builder, x: Inputs) => Record<string, Value>

const TOKEN_KEYS = ['s', 'old', 'ref', 'teacher', 'control', 'adv', 'mask', 'entropy'] as const

/** Inputs are declared on first use, so a graph only has the inputs its term reads. */
function lazyInputs(op: Builder, dtype: DType): Inputs {
  const made = new Map<string, Value>()
  const get = (name: string, shape: string[]) => {
    let v = made.get(name)
    if (!v) {
      v = op.input(name, dtype, shape)
      made.set(name, v)
    }
    return v
  }
  const x = {} as Inputs
  for (const key of TOKEN_KEYS) Object.defineProperty(x, key, { get: () => get(key, ['B', 'T']) })
  Object.defineProperty(x, 'sampleMask', { get: () => get('sampleMask', ['B']) })
  return x
}

type StopMode = { kind: 'live' } | { kind: 'record' } | { kind: 'frozen'; values: Record<string, Float64Array> }

interface RunOptions {
  dtype?: 'float32' | 'float64'
  /** Adds `s_grad` = d loss / d s (the build must return `loss`). */
  grad?: boolean
  stop?: StopMode
}

export type Results = Record<string, Float64Array>

export async function runTerm(engine: Engine, build: Build, batch: Batch, options: RunOptions = {}): Promise<Results> {
  const dtype = options.dtype ?? 'float64'
  const stop = options.stop ?? { kind: 'live' }
  const graph = new Graph('seed-term')
  const base = createBuilder(graph)
  let count = 0
  const op: Builder =
    stop.kind === 'live'
      ? base
      : {
          ...base,
          stopGradient: (v: Value) =>
            stop.kind === 'record'
              ? base.output(base.stopGradient(v), `stopped_${count++}`)
              : base.input(`stopped_${count++}`, v.dtype, v.shape),
        }
  const x = lazyInputs(op, dtype)
  const outputs = build(op, x)
  for (const [name, value] of Object.entries(outputs)) base.output(value, name)
  if (options.grad) {
    if (!outputs.loss) throw new Error('runTerm: grad needs a `loss` output')
    gradients(base, outputs.loss, [x.s])
  }
  const model = await engine.load(encodeModel(graph))
  const feeds: Record<string, TensorData> = {}
  const cast = (data: Float64Array) => (dtype === 'float32' ? Float32Array.from(data) : data)
  for (const name of model.inputNames) {
    if (name === 'sampleMask') feeds[name] = tensor(dtype, [batch.B], cast(batch.sampleMask))
    else if (name.startsWith('stopped_') && stop.kind === 'frozen') {
      const values = stop.values[name]
      if (!values) throw new Error(`runTerm: no frozen value for ${name}`)
      feeds[name] = tensor(dtype, [batch.B, batch.T], cast(values))
    } else feeds[name] = tensor(dtype, [batch.B, batch.T], cast(batch[name as (typeof TOKEN_KEYS)[number]]))
  }
  const out = await engine.run(model, feeds) // sessions are cached by model bytes: FD reruns reuse them
  const results: Results = {}
  for (const [name, t] of Object.entries(out)) results[name] = Float64Array.from(t.data as ArrayLike<number>)
  return results
}

export interface FdCheck {
  analytic: Float64Array
  numeric: Float64Array
  worst: number
}

/** d loss / d s from the backward graph vs central differences with stop-gradient values frozen. */
export async function checkGradient(engine: Engine, build: Build, batch: Batch, h = 1e-6): Promise<FdCheck> {
  const recorded = await runTerm(engine, build, batch, { grad: true, stop: { kind: 'record' } })
  const frozen: Record<string, Float64Array> = {}
  for (const [name, values] of Object.entries(recorded)) if (name.startsWith('stopped_')) frozen[name] = values
  const analytic = recorded.s_grad!
  const numeric = new Float64Array(batch.s.length)
  const lossAt = async (s: Float64Array) =>
    (await runTerm(engine, build, { ...batch, s }, { stop: { kind: 'frozen', values: frozen } })).loss![0]!
  for (let i = 0; i < batch.s.length; i++) {
    const plus = Float64Array.from(batch.s)
    const minus = Float64Array.from(batch.s)
    plus[i]! += h
    minus[i]! -= h
    numeric[i] = ((await lossAt(plus)) - (await lossAt(minus))) / (2 * h)
  }
  let worst = 0
  for (let i = 0; i < numeric.length; i++) worst = Math.max(worst, Math.abs(analytic[i]! - numeric[i]!))
  return { analytic, numeric, worst }
}
