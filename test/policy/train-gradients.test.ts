// The train graph's gradients against directional finite differences (float64, every parameter tensor) for
// each loss form SEED needs. Stop-gradient quantities are held fixed in the finite differences: they are fed
// as inputs at their values at θ, which is what stop-gradient means (docs/algorithm.md §6.3).
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { type Builder, createLocalEngine, type Feeds, type Value } from '../../engine/index.ts'
import { mulberry32 } from '../../envs/rng.ts'
import { initWeights } from '../../policy/init.ts'
import { IO, type TokenScores } from '../../policy/model.ts'
import { parameterSpecs } from '../../policy/parameters.ts'
import { policyModel } from '../../policy/trainer.ts'
import { SMALL } from './small-config.ts'

type Inputs = Record<'mask' | 'old' | 'ref' | 'teacher' | 'adv', Value>

/** A loss form: `frozen` = the stop-gradient value, when the finite differences must hold it fixed. */
type LossForm = (op: Builder, s: TokenScores, x: Inputs, frozen?: Value) => { loss: Value; stopped?: Value }

const maskedMean = (op: Builder, perToken: Value, mask: Value) =>
  op.Div(
    op.ReduceSum(op.Mul(perToken, mask), undefined, { keepdims: 0 }),
    op.ReduceSum(mask, undefined, { keepdims: 0 }),
  )

const LOSSES: Record<string, LossForm> = {
  'negative log-likelihood': (op, s, x) => ({ loss: maskedMean(op, op.Neg(s.logp), x.mask) }),
  'PPO-clip with dual clip': (op, s, x) => {
    const ratio = op.Exp(op.Sub(s.logp, x.old))
    const unclipped = op.Mul(op.Neg(x.adv), ratio)
    const clipped = op.Mul(op.Neg(x.adv), op.Clip(ratio, 0.8, 1.2))
    const pg = op.Max(unclipped, clipped)
    const dual = op.Min(pg, op.Mul(op.Neg(x.adv), 3)) // bounds the loss of negative advantages by 3·|A|
    return { loss: maskedMean(op, op.Where(op.Less(x.adv, 0), dual, pg), x.mask) }
  },
  'k3 KL to the reference': (op, s, x) => {
    const d = op.Sub(x.ref, s.logp)
    return { loss: maskedMean(op, op.Sub(op.Sub(op.Exp(d), d), 1), x.mask) }
  },
  'entropy bonus': (op, s, x) => ({ loss: op.Neg(maskedMean(op, s.entropy, x.mask)) }),
  'gated OPD stopgrad(σ(β(t − s)))·(t − s)': (op, s, x, frozen) => {
    const gap = op.Sub(x.teacher, s.logp)
    const gate = frozen ?? op.stopGradient(op.Sigmoid(op.Mul(gap, 5)))
    return { loss: op.Neg(maskedMean(op, op.Mul(gate, gap), x.mask)), stopped: gate }
  },
}

describe('train graph gradients vs finite differences (float64)', () => {
  const engine = createLocalEngine({ threads: 1, graphOptimizationLevel: 'basic' }) // 'all' fuses SiLU into a float32-only kernel
  after(() => engine.close())
  const weights = initWeights(SMALL, mulberry32(9), 0.3)
  const model = policyModel(engine, SMALL, weights, { dtype: 'float64' })
  const items = [
    { context: [3, 8, 1], response: [9, 14, 2, 7] },
    { context: [5], response: [6, 6, 40] },
  ]
  const batch = model.tokenBatch(items, 0.8)
  const noise = mulberry32(4)
  const next = () => noise.next()
  const perToken = (f: () => number) => model.float([batch.B, batch.T], Array.from({ length: batch.B * batch.T }, f))
  const inputs: Feeds = {
    mask: model.float([batch.B, batch.T], batch.responseMask),
    old: perToken(() => -3 + next()),
    ref: perToken(() => -3 + next()),
    teacher: perToken(() => -4 + 3 * next()),
    adv: perToken(() => 2 * next() - 1),
  }

  for (const [name, form] of Object.entries(LOSSES)) {
    it(name, async () => {
      const declare = (op: Builder): Inputs => ({
        mask: op.input('mask', 'float64', ['B', 'T']),
        old: op.input('old', 'float64', ['B', 'T']),
        ref: op.input('ref', 'float64', ['B', 'T']),
        teacher: op.input('teacher', 'float64', ['B', 'T']),
        adv: op.input('adv', 'float64', ['B', 'T']),
      })
      const train = await model.gradientModel((op, scores) => {
        const { loss, stopped } = form(op, scores, declare(op))
        return { loss, ...(stopped ? { extra: { stopped } } : {}) }
      })
      const frozen = await model.gradientModel((op, scores) => ({
        loss: form(op, scores, declare(op), op.input('frozen', 'float64', ['B', 'T'])).loss,
      }))
      const feeds: Feeds = { ...batch.feeds, ...(await model.trainedFeeds()), ...inputs }
      const out = await engine.run(train, feeds)
      const fixed: Feeds = { ...feeds, frozen: out.stopped ?? perToken(() => 0) }
      const { frozen: _unused, ...lossFeeds } = fixed
      const lossModel = out.stopped ? frozen : train
      const evalFeeds = out.stopped ? fixed : lossFeeds
      const dir = mulberry32(21)
      for (const spec of parameterSpecs(SMALL)) {
        const base = evalFeeds[spec.name]?.data as Float64Array
        const direction = Float64Array.from(base, () => dir.next() * 2 - 1)
        const lossAt = async (h: number) => {
          const data = Float64Array.from(base, (v, i) => v + h * (direction[i] as number))
          const r = await engine.run(lossModel, { ...evalFeeds, [spec.name]: model.float(spec.shape, data) })
          return Number(r[IO.loss]?.data[0])
        }
        const h = 1e-5
        const numeric = ((await lossAt(h)) - (await lossAt(-h))) / (2 * h)
        const grad = out[`${spec.name}_grad`]?.data as Float64Array
        const analytic = direction.reduce((acc, d, i) => acc + d * (grad[i] as number), 0)
        assert.ok(
          Math.abs(analytic - numeric) <= 1e-7 + 1e-5 * Math.abs(numeric),
          `${spec.name}: analytic ${analytic} vs numeric ${numeric}`,
        )
      }
    })
  }
})
