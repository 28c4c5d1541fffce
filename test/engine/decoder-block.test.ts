// A Llama-style decoder block built from the public builder (embedding, RMSNorm, rotary, grouped-query causal
// attention, SwiGLU, tied output layer, per-token log-probs, a loss with stop-gradient), checked against
// directional finite differences in float64: every parameter tensor moves along a random direction at once.
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import {
  type Builder,
  createBuilder,
  createLocalEngine,
  encodeModel,
  Graph,
  gradients,
  tensor,
  type Value,
} from '../../engine/index.ts'
import { rng } from './gradcheck.ts'

const [B, T, V, C, H, KV, D, F] = [2, 5, 11, 8, 2, 1, 4, 12] // D = C / H; KV heads shared by H / KV query heads

const PARAMS: Record<string, number[]> = {
  embed: [V, C],
  norm1: [C],
  wq: [C, H * D],
  wk: [C, KV * D],
  wv: [C, KV * D],
  wo: [H * D, C],
  norm2: [C],
  gate: [C, F],
  up: [C, F],
  down: [F, C],
  normF: [C],
}

/** (B, heads, T, D) with rotary position embedding applied by rotate-half. */
function rotary(op: Builder, x: Value, cos: Value, sin: Value): Value {
  const half = D / 2
  const x1 = op.Slice(x, [0], [half], [-1])
  const x2 = op.Slice(x, [half], [D], [-1])
  const rotated = op.Concat([op.Neg(x2), x1], -1)
  return op.Add(op.Mul(x, cos), op.Mul(rotated, sin))
}

function heads(op: Builder, x: Value, n: number): Value {
  return op.Transpose(op.Reshape(x, [0, 0, n, D]), [0, 2, 1, 3]) // (B, n, T, D)
}

/**
 * `frozen`: the stop-gradient factor becomes an input, so finite differences hold it fixed at its value at θ
 * (what stop-gradient means); otherwise it is computed in the graph and also returned as `stopped`.
 */
function build(frozen: boolean, dtype: 'float32' | 'float64' = 'float64') {
  const graph = new Graph('block')
  const op = createBuilder(graph)
  const p: Record<string, Value> = {}
  for (const [name, dims] of Object.entries(PARAMS)) p[name] = op.input(name, dtype, dims)
  const ids = op.input('ids', 'int64', ['B', 'T'])
  const targets = op.input('targets', 'int64', ['B', 'T'])
  const mask = op.input('mask', dtype, ['B', 'T'])
  const oldLogp = op.input('old_logp', dtype, ['B', 'T'])
  const cos = op.input('cos', dtype, ['T', D])
  const sin = op.input('sin', dtype, ['T', D])

  const x = op.Gather(p.embed!, ids) // (B, T, C)
  const h = op.scope('attn', () => {
    const n = op.RMSNormalization(x, p.norm1!, { epsilon: 1e-6 })
    const q = rotary(op, heads(op, op.MatMul(n, p.wq!), H), cos, sin) // (B, H, T, D)
    const k = rotary(op, heads(op, op.MatMul(n, p.wk!), KV), cos, sin) // (B, KV, T, D)
    const v = heads(op, op.MatMul(n, p.wv!), KV)
    const repeat = (t: Value) => op.Expand(t, op.Concat([op.Shape(q)], 0)) // KV = 1 head shared by all H
    const scores = op.Div(op.MatMul(q, op.transposeLast(repeat(k))), Math.sqrt(D)) // (B, H, T, T)
    const causal = op.causalMask(op.dim(q, 2), op.dim(k, 2))
    const att = op.Softmax(op.Where(causal, scores, -1e9), -1)
    const o = op.Reshape(op.Transpose(op.MatMul(att, repeat(v)), [0, 2, 1, 3]), [0, 0, H * D])
    return op.Add(x, op.MatMul(o, p.wo!))
  })
  const y = op.scope('mlp', () => {
    const n = op.RMSNormalization(h, p.norm2!, { epsilon: 1e-6 })
    const g = op.MatMul(n, p.gate!)
    const swish = op.Mul(g, op.Sigmoid(g))
    return op.Add(h, op.MatMul(op.Mul(swish, op.MatMul(n, p.up!)), p.down!))
  })
  const logits = op.MatMul(op.RMSNormalization(y, p.normF!, { epsilon: 1e-6 }), op.Transpose(p.embed!)) // (B, T, V)
  const logp = op.Squeeze(op.GatherElements(op.LogSoftmax(logits, -1), op.Unsqueeze(targets, [-1]), 2), [-1]) // (B, T)
  // loss = masked mean of −logp plus a PPO-style ratio term whose clip bounds see logp only through stopGradient
  const ratio = op.Exp(op.Sub(logp, oldLogp))
  const clipped = op.Clip(ratio, 0.8, 1.2)
  const ppo = op.Min(op.Mul(ratio, 0.5), op.Mul(clipped, 0.5))
  const stopped = frozen ? op.input('stopped', dtype, ['B', 'T']) : op.output(op.stopGradient(op.Exp(logp)), 'stopped')
  const perToken = op.Add(op.Neg(logp), op.Mul(ppo, stopped))
  const loss = op.Div(
    op.ReduceSum(op.Mul(perToken, mask), undefined, { keepdims: 0 }),
    op.ReduceSum(mask, undefined, { keepdims: 0 }),
  )
  op.output(loss, 'loss')
  return { graph, op, loss, params: Object.values(p) }
}

function makeFeeds() {
  const next = rng(7)
  const normal = () => (next() * 2 - 1) * 0.5
  const feeds: Record<string, ReturnType<typeof tensor>> = {}
  for (const [name, dims] of Object.entries(PARAMS)) {
    const n = dims.reduce((a, b) => a * b, 1)
    feeds[name] = tensor(
      'float64',
      dims,
      Array.from({ length: n }, () => (name.startsWith('norm') ? 1 + normal() * 0.2 : normal())),
    )
  }
  const ints = (n: number) => Array.from({ length: n }, () => Math.floor(next() * V))
  feeds.ids = tensor('int64', [B, T], ints(B * T))
  feeds.targets = tensor('int64', [B, T], ints(B * T))
  feeds.mask = tensor('float64', [B, T], [1, 1, 1, 1, 0, 1, 1, 1, 0, 0])
  feeds.old_logp = tensor(
    'float64',
    [B, T],
    Array.from({ length: B * T }, () => -2.4 + normal()),
  )
  const angle = (t: number, i: number) => t / 10000 ** ((2 * (i % (D / 2))) / D)
  feeds.cos = tensor(
    'float64',
    [T, D],
    Array.from({ length: T * D }, (_, j) => Math.cos(angle(Math.floor(j / D), j % D))),
  )
  feeds.sin = tensor(
    'float64',
    [T, D],
    Array.from({ length: T * D }, (_, j) => Math.sin(angle(Math.floor(j / D), j % D))),
  )

  return { feeds, normal }
}

describe('decoder block gradients', () => {
  // 'all' fuses x·sigmoid(x) into com.microsoft.QuickGelu, which has no float64 kernel
  const engine = createLocalEngine({ threads: 1, graphOptimizationLevel: 'basic' })
  after(() => engine.close())

  it('every parameter gradient agrees with a directional finite difference', async () => {
    const { feeds, normal } = makeFeeds()
    const forward = build(true)
    const lossModel = await engine.load(encodeModel(forward.graph))
    const train = build(false)
    gradients(train.op, train.loss, train.params)
    const trainModel = await engine.load(encodeModel(train.graph))
    const out = await engine.run(trainModel, feeds)
    feeds.stopped = out.stopped!

    for (const name of Object.keys(PARAMS)) {
      const direction = Array.from(feeds[name]!.data as Float64Array, () => normal())
      const shifted = async (h: number) => {
        const data = Float64Array.from(feeds[name]!.data as Float64Array, (v, i) => v + h * direction[i]!)
        const r = await engine.run(lossModel, { ...feeds, [name]: { ...feeds[name]!, data } })
        return Number(r.loss!.data[0])
      }
      const h = 1e-5
      const numeric = ((await shifted(h)) - (await shifted(-h))) / (2 * h)
      const grad = out[`${name}_grad`]!.data as Float64Array
      const analytic = direction.reduce((s, d, i) => s + d * grad[i]!, 0)
      assert.ok(
        Math.abs(analytic - numeric) <= 1e-7 + 1e-6 * Math.abs(numeric),
        `${name}: analytic ${analytic} vs numeric ${numeric}`,
      )
    }
  })

  it('float32 with every graph optimization gives the float64 loss and gradients to float32 precision', async () => {
    const { feeds } = makeFeeds()
    const exact = build(false)
    gradients(exact.op, exact.loss, exact.params)
    const ref = await engine.run(await engine.load(encodeModel(exact.graph)), feeds)
    const fast = build(false, 'float32')
    gradients(fast.op, fast.loss, fast.params)
    const production = createLocalEngine({ threads: 1 })
    try {
      const f32: typeof feeds = {}
      for (const [k, t] of Object.entries(feeds))
        f32[k] = t.dtype === 'float64' ? tensor('float32', t.dims, Float32Array.from(t.data as Float64Array)) : t
      const out = await production.run(await production.load(encodeModel(fast.graph)), f32)
      for (const name of ['loss', ...Object.keys(PARAMS).map((p) => `${p}_grad`)]) {
        const a = out[name]!.data as Float32Array
        const b = ref[name]!.data as Float64Array
        const scale = Math.max(...Array.from(b, Math.abs))
        const worst = Math.max(...Array.from(b, (v, i) => Math.abs(v - a[i]!)))
        assert.ok(worst <= 1e-5 * Math.max(1, scale), `${name}: max abs difference ${worst} (scale ${scale})`)
      }
    } finally {
      await production.close()
    }
  })
})
