import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { createBuilder, createLocalEngine, Graph } from '../../engine/index.ts'
import {
  type ActorLossConfig,
  ALGORITHM_NAMES,
  ALGORITHMS,
  actorLoss,
  aggregate,
  entropyTerm,
  klLoss,
  LossConfigError,
  type OpdGate,
  opdLoss,
  ppoClipLoss,
  SeedInputError,
  sftLoss,
} from '../../seed/index.ts'
import { rng } from '../engine/gradcheck.ts'
import { type Build, checkGradient, runTerm } from './graph-harness.ts'
import {
  type Batch,
  type RefAggregation,
  refActor,
  refAggregate,
  refEntropy,
  refKl,
  refOpd,
  refPpo,
  refSft,
} from './reference-losses.ts'

const engine = createLocalEngine({ threads: 1, graphOptimizationLevel: 'basic' })
after(() => engine.close())

const f64 = (values: number[]) => Float64Array.from(values)

/** A batch from explicit rows; unspecified per-token inputs are zeros, masks ones. */
function batch(B: number, T: number, parts: Partial<Record<keyof Batch, number[]>>): Batch {
  const tokens = (key: keyof Batch, fill: number) => f64(parts[key] ?? Array(B * T).fill(fill))
  return {
    B,
    T,
    s: tokens('s', 0),
    old: tokens('old', 0),
    ref: tokens('ref', 0),
    teacher: tokens('teacher', 0),
    control: tokens('control', 0),
    adv: tokens('adv', 0),
    mask: tokens('mask', 1),
    entropy: tokens('entropy', 0),
    sampleMask: f64(parts.sampleMask ?? Array(B).fill(1)),
  }
}

/** Random inputs away from the PPO kinks (ratio 0.8, 1.2 and 3), so that finite differences are smooth. */
function randomBatch(seed: number, B = 3, T = 4): Batch {
  const next = rng(seed)
  const uniform = (lo: number, hi: number) => lo + (hi - lo) * next()
  const n = B * T
  const b = batch(B, T, {})
  for (let i = 0; i < n; i++) {
    b.old[i] = uniform(-3, -0.2)
    let delta = 0
    do delta = uniform(-1.5, 1.5)
    while ([0.8, 1.2, 3].some((k) => Math.abs(Math.exp(delta) - k) < 2e-2))
    b.s[i] = b.old[i]! + delta
    b.ref[i] = b.s[i]! + uniform(-1.5, 1.5)
    b.teacher[i] = b.s[i]! + uniform(-2, 2)
    const a = uniform(0.1, 2)
    b.adv[i] = next() < 0.5 ? -a : a
    b.entropy[i] = uniform(0.1, 3)
  }
  for (let r = 0; r < B; r++) {
    const length = 1 + Math.floor(next() * T)
    for (let t = 0; t < T; t++) b.mask[r * T + t] = t < length ? 1 : 0
    b.sampleMask[r] = r % 2 === 0 ? 1 : 0
  }
  for (let i = 0; i < n; i++) b.control[i] = b.teacher[i]! + uniform(-2, 2) // drawn last: earlier fields unchanged
  return b
}

const close = (actual: number, expected: number, tol: number, what: string) =>
  assert.ok(Math.abs(actual - expected) <= tol, `${what}: ${actual} vs expected ${expected} (tol ${tol})`)

const closeAll = (actual: ArrayLike<number>, expected: ArrayLike<number>, tol: number, what: string) => {
  assert.equal(actual.length, expected.length, `${what}: length`)
  for (let i = 0; i < expected.length; i++) close(actual[i]!, expected[i]!, tol, `${what}[${i}]`)
}

const ppoBuild =
  (aggregation: RefAggregation = 'token-mean', clampLogRatio = true): Build =>
  (op, x) => {
    const r = ppoClipLoss(
      op,
      { logProbs: x.s, oldLogProbs: x.old, advantages: x.adv, mask: x.mask },
      { aggregation, clampLogRatio },
    )
    return { loss: r.loss, clipFraction: r.clipFraction, clipFractionLower: r.clipFractionLower, approxKl: r.approxKl }
  }
const klBuild: Build = (op, x) => ({ loss: klLoss(op, { logProbs: x.s, refLogProbs: x.ref, mask: x.mask }).loss })
/** The reference's k3: no clamp of d before exp, only of the value. */
const klReferenceBuild: Build = (op, x) => ({
  loss: klLoss(op, { logProbs: x.s, refLogProbs: x.ref, mask: x.mask }, { clampLogRatio: false }).loss,
})
const entropyBuild: Build = (op, x) => ({ loss: entropyTerm(op, { entropy: x.entropy, mask: x.mask }).loss })
const sftBuild: Build = (op, x) => ({ loss: sftLoss(op, { logProbs: x.s, mask: x.mask }).loss })
const opdBuild =
  (beta?: number, gateBaseline?: number, gate?: OpdGate): Build =>
  (op, x) => {
    const r = opdLoss(
      op,
      {
        logProbs: x.s,
        teacherLogProbs: x.teacher,
        sampleMask: x.sampleMask,
        mask: x.mask,
        ...(gate === 'control' ? { controlLogProbs: x.control } : {}),
      },
      {
        ...(beta === undefined ? {} : { beta }),
        ...(gateBaseline === undefined ? {} : { gateBaseline }),
        ...(gate === undefined ? {} : { gate }),
      },
    )
    return {
      loss: r.loss,
      gateMean: r.gateMean,
      positiveGapShare: r.positiveGapShare,
      gapMean: r.gapMean,
      activeTokenShare: r.activeTokenShare,
    }
  }
const SEED_CONFIG: ActorLossConfig = {
  terms: { kl: true, entropy: true, opd: true },
  klCoef: 0.01,
  entropyCoef: 0.001,
  opdCoef: 0.01,
}
/** The batch's per-token Values as actorLoss takes them. */
const actorInputs = (x: Parameters<Build>[1]) => ({
  logProbs: x.s,
  oldLogProbs: x.old,
  advantages: x.adv,
  mask: x.mask,
  refLogProbs: x.ref,
  entropy: x.entropy,
  teacherLogProbs: x.teacher,
  controlLogProbs: x.control,
  opdSampleMask: x.sampleMask,
})

const actorBuild =
  (config: ActorLossConfig = SEED_CONFIG): Build =>
  (op, x) => {
    const r = actorLoss(op, actorInputs(x), config)
    return { loss: r.loss, clipFraction: r.pg.clipFraction }
  }

// token i: A, log-ratio → per-token loss (hand-computed), clipped?, dual-clipped?
// 1: A=1,  r=1.5 → max(−1.5, −1.2) = −1.2 (clipped)        2: A=1,  r=0.5 → max(−0.5, −0.8) = −0.5
// 3: A=−1, r=4   → min(3, max(4, 1.2)) = 3 (dual clip)      4: A=−2, r=0.5 → min(6, max(1, 1.6)) = 1.6 (clipped)
// 5: masked out (A=5, r=e³): must not count
const PPO_HAND = batch(1, 5, {
  old: [0, 0, 0, 0, 0],
  s: [Math.log(1.5), Math.log(0.5), Math.log(4), Math.log(0.5), 3],
  adv: [1, 1, -1, -2, 5],
  mask: [1, 1, 1, 1, 0],
})

describe('PPO clipped surrogate', () => {
  it('matches hand-computed loss, clip fractions and approximate KL', async () => {
    const out = await runTerm(engine, ppoBuild(), PPO_HAND)
    close(out.loss![0]!, (-1.2 - 0.5 + 3 + 1.6) / 4, 5e-8, 'loss')
    close(out.clipFraction![0]!, 2 / 4, 5e-8, 'clip fraction')
    close(out.clipFractionLower![0]!, 1 / 4, 5e-8, 'dual-clip fraction')
    close(out.approxKl![0]!, -Math.log(1.5) / 4, 5e-8, 'approx KL') // −(ln 1.5 + ln .5 + ln 4 + ln .5)/4
  })

  it('passes gradient only through the unclipped token (hand-computed)', async () => {
    const out = await runTerm(engine, ppoBuild(), PPO_HAND, { grad: true })
    // only token 2 is unclipped: d(−A·r)/ds = −A·r = −0.5, over 4 tokens
    closeAll(out.s_grad!, [0, -0.125, 0, 0, 0], 5e-8, 's_grad')
  })

  it('has ratio 1 and clip fraction 0 at s = old, in float32 as in training', async () => {
    const b = randomBatch(11)
    const atOld = { ...b, s: Float64Array.from(b.old) }
    const out = await runTerm(engine, ppoBuild(), atOld, { dtype: 'float32', grad: true })
    for (const key of ['clipFraction', 'clipFractionLower', 'approxKl']) {
      assert.ok(out[key]![0] === 0, `${key} = ${out[key]![0]}`)
    }
    const count = b.mask.reduce((a, m) => a + m, 0)
    const meanA = b.adv.reduce((a, v, i) => a + v * b.mask[i]!, 0) / count
    close(out.loss![0]!, -meanA, 1e-6, 'loss = −mean(A)')
    closeAll(
      out.s_grad!,
      Array.from(b.adv, (a, i) => (-a * b.mask[i]!) / count),
      1e-6,
      'gradient −A/N',
    )
  })

  it('clamps the log-ratio: an extreme ratio gives a finite loss and gradient in float32', async () => {
    const b = batch(1, 2, { old: [-100, 0], s: [0, -100], adv: [-1, 1] })
    const out = await runTerm(engine, ppoBuild(), b, { dtype: 'float32', grad: true })
    // token 1: r = e^20 (clamped), A<0 → dual clip bound 3; token 2: r = e^-20, A>0 → max(−e^-20, −0.8) ≈ 0
    close(out.loss![0]!, (3 - Math.exp(-20)) / 2, 1e-6, 'loss')
    for (const g of out.s_grad!) assert.ok(Number.isFinite(g), `gradient ${g} is finite`)
  })

  it("clampLogRatio false is the reference's plain exp: the log-ratio is not cut at ±20", async () => {
    // one token with log-ratio −25: approx KL = −log ratio = 25 (reference) vs 20 (clamped); the masked mean's
    // 1e-8 guard is inside the tolerance
    const b = batch(1, 1, { old: [0], s: [-25], adv: [1] })
    const reference = await runTerm(engine, ppoBuild('token-mean', false), b)
    const ours = await runTerm(engine, ppoBuild(), b)
    close(reference.approxKl![0]!, 25, 1e-6, 'reference approx KL')
    close(ours.approxKl![0]!, 20, 1e-6, 'clamped approx KL')
    const ref = refPpo(b, 'token-mean', 0.2, 3, false)
    close(reference.loss![0]!, ref.loss, 1e-15, 'reference loss vs typed-array reference')
    close(reference.approxKl![0]!, ref.approxKl, 1e-12, 'reference approx KL vs typed-array reference')
  })

  it('why the clamp is the default: without it an overflowing ratio makes a float32 gradient NaN', async () => {
    const b = batch(1, 2, { old: [-100, 0], s: [0, -1], adv: [-1, 1] })
    const reference = await runTerm(engine, ppoBuild('token-mean', false), b, { dtype: 'float32', grad: true })
    const ours = await runTerm(engine, ppoBuild(), b, { dtype: 'float32', grad: true })
    close(reference.loss![0]!, ours.loss![0]!, 1e-6, 'same loss (the dual clip bound holds)')
    assert.ok(
      Array.from(reference.s_grad!).some((g) => !Number.isFinite(g)),
      `unclamped gradient ${Array.from(reference.s_grad!)} has a non-finite entry`,
    )
    for (const g of ours.s_grad!) assert.ok(Number.isFinite(g), `clamped gradient ${g} is finite`)
  })

  for (const mode of ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum'] as const) {
    it(`equals the typed-array reference on random inputs (${mode})`, async () => {
      for (const seed of [1, 2, 3]) {
        const b = randomBatch(seed)
        const out = await runTerm(engine, ppoBuild(mode), b)
        const ref = refPpo(b, mode)
        close(out.loss![0]!, ref.loss, 1e-12, `seed ${seed} loss`)
        close(out.clipFraction![0]!, ref.clipFraction, 1e-12, `seed ${seed} clip fraction`)
        close(out.clipFractionLower![0]!, ref.clipFractionLower, 1e-12, `seed ${seed} lower clip fraction`)
        close(out.approxKl![0]!, ref.approxKl, 1e-12, `seed ${seed} approx KL`)
      }
    })
  }

  it('gradient with respect to s agrees with central finite differences', async () => {
    const fd = await checkGradient(engine, ppoBuild(), randomBatch(4))
    assert.ok(fd.worst < 1e-7, `worst |analytic − numeric| = ${fd.worst}`)
    assert.ok(
      fd.analytic.some((g) => Math.abs(g) > 1e-3),
      'some token has a non-zero gradient',
    )
  })
})

describe('aggregation', () => {
  // row 0: losses [1, 2, 3] mask [1, 1, 0]; row 1: [4, 5, 6] mask [1, 1, 1]
  const b = batch(2, 3, { entropy: [1, 2, 3, 4, 5, 6], mask: [1, 1, 0, 1, 1, 1] })
  const cases: Array<[RefAggregation, number]> = [
    ['token-mean', (1 + 2 + 4 + 5 + 6) / 5],
    ['seq-mean-token-mean', (1.5 + 5) / 2],
    ['seq-mean-token-sum', (3 + 15) / 2],
  ]
  for (const [mode, expected] of cases) {
    it(`${mode} gives the hand-computed value`, async () => {
      const out = await runTerm(engine, (op, x) => ({ loss: aggregate(op, x.entropy, x.mask, mode) }), b)
      close(out.loss![0]!, expected, 1e-7, mode)
      close(
        refAggregate(
          b,
          (i) => b.entropy[i]!,
          (i) => b.mask[i]!,
          mode,
        ),
        expected,
        1e-7,
        `${mode} reference`,
      )
    })
  }

  it('an empty mask gives 0, not NaN', async () => {
    const empty = batch(1, 2, { entropy: [1, 2], mask: [0, 0] })
    const out = await runTerm(engine, entropyBuild, empty)
    assert.ok(out.loss![0] === 0, `loss ${out.loss![0]}`)
  })
})

describe('KL to the reference (k3) and entropy', () => {
  // d = ref − s: 0, 1, −1, 25 (clamped to 20, then the value to 10)
  const b = batch(1, 4, { s: [-1, -2, -1, -30], ref: [-1, -1, -2, -5] })

  it('matches hand-computed k3 values with both clamps', async () => {
    const out = await runTerm(engine, klBuild, b, { grad: true })
    close(out.loss![0]!, (0 + (Math.E - 2) + Math.exp(-1) + 10) / 4, 5e-8, 'kl')
    // d kl / d s = −(eᵈ − 1) inside the clamps, 0 where the value clamp holds
    closeAll(out.s_grad!, [0, -(Math.E - 1) / 4, (1 - Math.exp(-1)) / 4, 0], 5e-8, 's_grad')
  })

  it('stays finite in float32 where exp would overflow without the inner clamp', async () => {
    const extreme = batch(1, 2, { s: [-200, -1], ref: [0, -1] })
    const out = await runTerm(engine, klBuild, extreme, { dtype: 'float32', grad: true })
    close(out.loss![0]!, 5, 1e-6, 'clamped kl mean')
    for (const g of out.s_grad!) assert.ok(Number.isFinite(g), `gradient ${g} is finite`)
  })

  it("without the inner clamp (the reference's) values are the same; float32 gradients overflow", async () => {
    // k3 at |d| = 20 is > 10 already, so the inner clamp never changes a value, only the gradient's 0·∞
    const moderate = randomBatch(8)
    close(
      (await runTerm(engine, klReferenceBuild, moderate)).loss![0]!,
      (await runTerm(engine, klBuild, moderate)).loss![0]!,
      1e-15,
      'same k3 value',
    )
    const extreme = batch(1, 2, { s: [-200, -1], ref: [0, -1] })
    const reference = await runTerm(engine, klReferenceBuild, extreme, { dtype: 'float32', grad: true })
    close(reference.loss![0]!, 5, 1e-6, 'value clamped at 10')
    assert.ok(
      Array.from(reference.s_grad!).some((g) => !Number.isFinite(g)),
      `unclamped KL gradient ${Array.from(reference.s_grad!)} has a non-finite entry`,
    )
  })

  it('equals the typed-array reference on random inputs', async () => {
    for (const seed of [5, 6]) {
      const b2 = randomBatch(seed)
      close((await runTerm(engine, klBuild, b2)).loss![0]!, refKl(b2), 1e-12, `kl seed ${seed}`)
      close((await runTerm(engine, entropyBuild, b2)).loss![0]!, refEntropy(b2), 1e-12, `entropy seed ${seed}`)
    }
  })

  it('KL gradient with respect to s agrees with central finite differences', async () => {
    const fd = await checkGradient(engine, klBuild, randomBatch(7))
    assert.ok(fd.worst < 1e-7, `worst |analytic − numeric| = ${fd.worst}`)
  })

  it('entropy is the masked mean of the per-token entropy', async () => {
    const e = batch(1, 3, { entropy: [0.5, 1.5, 9], mask: [1, 1, 0] })
    close((await runTerm(engine, entropyBuild, e)).loss![0]!, 1, 5e-8, 'entropy')
  })
})

describe('gated on-policy distillation', () => {
  // docs/algorithm.md §6.3 test vector (β = 1)
  const vector = batch(2, 2, { s: [-2, -1, -0.5, -0.25], teacher: [-1, -2, 0, 0], sampleMask: [1, 0] })

  it('reproduces the reference test vector: loss, active ratio, gap mean, gradient', async () => {
    const out = await runTerm(engine, opdBuild(1), vector, { grad: true })
    close(out.loss![0]!, 0.2310586, 1e-7, 'loss')
    close(out.activeTokenShare![0]!, 0.5, 1e-12, 'active token share')
    close(out.gapMean![0]!, 0, 5e-8, 'gap mean')
    close(out.gateMean![0]!, 0.5, 5e-8, 'gate mean') // (σ(1) + σ(−1)) / 2
    close(out.positiveGapShare![0]!, 0.5, 5e-8, 'positive gap share')
    closeAll(out.s_grad!, [-0.3655293, -0.1344707, 0, 0], 1e-7, 's_grad')
  })

  it('with a gate baseline b, weighs each token by g − b: the test vector with b = 0.5', async () => {
    const out = await runTerm(engine, opdBuild(1, 0.5), vector, { grad: true })
    const g = 1 / (1 + Math.exp(-1)) // row 0: gaps +1 and −1, gates σ(1) and σ(−1)
    // (g − 0.5)·1 and (1 − g − 0.5)·(−1) are both g − 0.5: the centred term is ≥ 0 wherever it is not 0
    close(out.loss![0]!, g - 0.5, 1e-7, 'loss')
    close(out.gateMean![0]!, 0.5, 5e-8, 'gate mean (the gate itself, before the baseline)')
    closeAll(out.s_grad!, [-(g - 0.5) / 2, (g - 0.5) / 2, 0, 0], 1e-7, 's_grad: the disfavoured token is lowered')
    const fd = await checkGradient(engine, opdBuild(undefined, 0.5), randomBatch(14))
    assert.ok(fd.worst < 1e-7, `worst |analytic − numeric| = ${fd.worst}`)
    await assert.rejects(runTerm(engine, opdBuild(1, 1), vector), LossConfigError)
  })

  it('the typed-array reference reproduces the test vector too', () => {
    const ref = refOpd(vector, 1)
    close(ref.loss, 0.2310586, 1e-7, 'reference loss')
    closeAll(ref.grad, [-0.3655293, -0.1344707, 0, 0], 1e-7, 'reference gradient')
  })

  it('uses β = 5 by default (hand-computed gate)', async () => {
    const b = batch(1, 2, { s: [-1, -1], teacher: [-0.8, -1.1] }) // gaps 0.2, −0.1
    const out = await runTerm(engine, opdBuild(), b, { grad: true })
    const g1 = 1 / (1 + Math.exp(-1)) // σ(5·0.2)
    const g2 = 1 / (1 + Math.exp(0.5)) // σ(5·(−0.1))
    close(out.loss![0]!, (g1 * 0.2 - g2 * 0.1) / 2, 5e-8, 'loss')
    closeAll(out.s_grad!, [-g1 / 2, -g2 / 2], 5e-8, 's_grad')
    close(out.positiveGapShare![0]!, 0.5, 5e-8, 'positive gap share')
  })

  it('is 0 with zero diagnostics and zero gradient when no trajectory was analyzed', async () => {
    const none = { ...randomBatch(8), sampleMask: f64([0, 0, 0]) }
    const out = await runTerm(engine, opdBuild(), none, { grad: true })
    for (const key of ['loss', 'gateMean', 'positiveGapShare', 'gapMean', 'activeTokenShare']) {
      assert.ok(out[key]![0] === 0, `${key} = ${out[key]![0]}`)
    }
    for (const g of out.s_grad!) assert.ok(g === 0, `gradient ${g}`)
  })

  it('equals the typed-array reference on random inputs', async () => {
    for (const seed of [9, 10, 12]) {
      const b = randomBatch(seed)
      const out = await runTerm(engine, opdBuild(), b, { grad: true })
      const ref = refOpd(b)
      for (const key of ['loss', 'gateMean', 'positiveGapShare', 'gapMean', 'activeTokenShare'] as const) {
        close(out[key]![0]!, ref[key], 1e-12, `seed ${seed} ${key}`)
      }
      closeAll(out.s_grad!, ref.grad, 1e-12, `seed ${seed} gradient`)
    }
  })

  it('gradient agrees with finite differences holding the gate and teacher fixed', async () => {
    const fd = await checkGradient(engine, opdBuild(), randomBatch(13))
    assert.ok(fd.worst < 1e-7, `worst |analytic − numeric| = ${fd.worst}`)
  })

  it('differencing through the gate would give a different number (the check can fail)', async () => {
    // without freezing, the numeric derivative is −g − β(t−s)g(1−g), which the stop-gradient rule must not match
    const b = batch(1, 1, { s: [-1], teacher: [-0.5] })
    const analytic = (await runTerm(engine, opdBuild(), b, { grad: true })).s_grad![0]!
    const h = 1e-6
    const lossAt = async (s: number) => (await runTerm(engine, opdBuild(), { ...b, s: f64([s]) })).loss![0]!
    const throughGate = ((await lossAt(-1 + h)) - (await lossAt(-1 - h))) / (2 * h)
    const g = 1 / (1 + Math.exp(-2.5))
    close(analytic, -g, 5e-8, 'stop-gradient derivative')
    close(throughGate, -g - 5 * 0.5 * g * (1 - g), 1e-6, 'derivative through the gate')
    assert.ok(Math.abs(analytic - throughGate) > 0.1)
  })
  describe('with the control gate σ(β·(t − c))', () => {
    it('gates on the teacher against the control, and still pushes s by −g (hand-computed)', async () => {
      // gaps t − c: +0.2 and −0.1, while t − s is −0.5 and +0.4: the student gate would rank them the other way
      const b = batch(1, 2, { s: [-1, -1.5], teacher: [-1.5, -1.1], control: [-1.7, -1] })
      const out = await runTerm(engine, opdBuild(undefined, undefined, 'control'), b, { grad: true })
      const g1 = 1 / (1 + Math.exp(-1)) // σ(5·0.2)
      const g2 = 1 / (1 + Math.exp(0.5)) // σ(5·(−0.1))
      close(out.loss![0]!, (g1 * -0.5 + g2 * 0.4) / 2, 5e-8, 'loss = mean g·(t − s)')
      closeAll(out.s_grad!, [-g1 / 2, -g2 / 2], 5e-8, 's_grad')
      close(out.gapMean![0]!, 0.05, 5e-8, 'gap mean is t − c')
      close(out.gateMean![0]!, (g1 + g2) / 2, 5e-8, 'gate mean')
      close(out.positiveGapShare![0]!, 0.5, 5e-8, 'positive gap share')
      const student = await runTerm(engine, opdBuild(), b, { grad: true })
      assert.ok(Math.abs(student.s_grad![0]! - out.s_grad![0]!) > 0.1, 'the student gate gives another gradient')
    })

    it('equals the typed-array reference on random inputs, with and without a baseline', async () => {
      for (const seed of [21, 22]) {
        const b = randomBatch(seed)
        const out = await runTerm(engine, opdBuild(undefined, undefined, 'control'), b, { grad: true })
        const ref = refOpd(b, 5, 'token-mean', 'control')
        for (const key of ['loss', 'gateMean', 'positiveGapShare', 'gapMean', 'activeTokenShare'] as const) {
          close(out[key]![0]!, ref[key], 1e-12, `seed ${seed} ${key}`)
        }
        closeAll(out.s_grad!, ref.grad, 1e-12, `seed ${seed} gradient`)
      }
      const fd = await checkGradient(engine, opdBuild(undefined, 0.5, 'control'), randomBatch(23))
      assert.ok(fd.worst < 1e-7, `worst |analytic − numeric| = ${fd.worst}`)
    })

    it('refuses to build without control log-probs, or with an unknown gate', () => {
      const op = createBuilder(new Graph('refuse'))
      const s = op.input('s', 'float64', ['B', 'T'])
      const m = op.input('m', 'float64', ['B'])
      const x = { logProbs: s, teacherLogProbs: s, mask: s, sampleMask: m }
      assert.throws(() => opdLoss(op, x, { gate: 'control' }), /control gate needs controlLogProbs/)
      assert.throws(() => opdLoss(op, x, { gate: 'teacher' as OpdGate }), /unknown gate "teacher"/)
    })
  })
})

describe('SFT loss', () => {
  it('is the mean negative log-likelihood of response tokens (hand-computed, with gradient)', async () => {
    const b = batch(1, 3, { s: [-1, -2, -3], mask: [1, 1, 0] })
    const out = await runTerm(engine, sftBuild, b, { grad: true })
    close(out.loss![0]!, 1.5, 5e-8, 'loss')
    closeAll(out.s_grad!, [-0.5, -0.5, 0], 5e-8, 's_grad')
  })

  it('equals the reference and finite differences on random inputs', async () => {
    const b = randomBatch(14)
    close((await runTerm(engine, sftBuild, b)).loss![0]!, refSft(b), 1e-12, 'loss')
    const fd = await checkGradient(engine, sftBuild, b)
    assert.ok(fd.worst < 1e-7, `worst |analytic − numeric| = ${fd.worst}`)
  })
})

describe('combined actor loss', () => {
  it('is L_pg − c_H·H + λ·L_opd + c_KL·L_kl over accumulation steps (reference, random inputs)', async () => {
    for (const seed of [15, 16]) {
      const b = randomBatch(seed)
      const config = { ...SEED_CONFIG, gradientAccumulation: 4 }
      const out = await runTerm(engine, actorBuild(config), b)
      close(out.loss![0]!, refActor(b, { klCoef: 0.01, entropyCoef: 0.001, opdCoef: 0.01, steps: 4 }), 1e-12, 'loss')
    }
  })

  it('with opdGate control, adds λ times the control-gated OPD term (reference, random inputs)', async () => {
    const b = randomBatch(24)
    const config = { ...SEED_CONFIG, opdCoef: 0.5, opdGate: 'control' as const }
    const out = await runTerm(engine, actorBuild(config), b)
    close(
      out.loss![0]!,
      refActor(b, { klCoef: 0.01, entropyCoef: 0.001, opdCoef: 0.5, gate: 'control' }),
      1e-12,
      'loss',
    )
    const student = refActor(b, { klCoef: 0.01, entropyCoef: 0.001, opdCoef: 0.5 })
    assert.ok(Math.abs(out.loss![0]! - student) > 1e-4, `the student gate gives ${student}: the check can fail`)
  })

  it('uses the aggregation mode for every term', async () => {
    const b = randomBatch(17)
    const out = await runTerm(engine, actorBuild({ ...SEED_CONFIG, aggregation: 'seq-mean-token-mean' }), b)
    const expected = refActor(b, { klCoef: 0.01, entropyCoef: 0.001, opdCoef: 0.01 }, 'seq-mean-token-mean')
    close(out.loss![0]!, expected, 1e-12, 'loss')
  })

  it('gradient agrees with finite differences (stop-gradient values fixed)', async () => {
    const config = { ...SEED_CONFIG, opdCoef: 0.5, klCoef: 0.3 } // large enough to matter in the check
    const fd = await checkGradient(engine, actorBuild(config), randomBatch(18))
    assert.ok(fd.worst < 1e-7, `worst |analytic − numeric| = ${fd.worst}`)
  })

  it('the distillation signal reaches the gradient: changing teacher log-probs changes it', async () => {
    const b = randomBatch(19)
    const base = await runTerm(engine, actorBuild(), b, { grad: true })
    const shifted = { ...b, teacher: b.teacher.map((t) => t + 1) }
    const moved = await runTerm(engine, actorBuild(), shifted, { grad: true })
    let changed = 0
    for (let i = 0; i < b.s.length; i++) {
      const active = b.mask[i]! * b.sampleMask[Math.floor(i / b.T)]!
      const delta = Math.abs(moved.s_grad![i]! - base.s_grad![i]!)
      if (active) {
        // λ·(g_old − g_new)/N: the gate rises with the teacher, so the push on the sampled token grows
        assert.ok(delta > 1e-6, `token ${i}: gradient moved by ${delta}`)
        assert.ok(moved.s_grad![i]! < base.s_grad![i]!, `token ${i}: a stronger teacher pushes log π up harder`)
        changed++
      } else assert.equal(delta, 0, `token ${i} is not distilled, its gradient must not move`)
    }
    assert.ok(changed > 0)
  })

  it('masked (unanalyzed) trajectories contribute nothing to the gradient', async () => {
    const b = randomBatch(20)
    const withOpd = await runTerm(engine, actorBuild(), b, { grad: true })
    const withoutOpd = await runTerm(engine, actorBuild({ ...SEED_CONFIG, opdCoef: 0 }), b, { grad: true })
    const ref = refOpd(b)
    for (let i = 0; i < b.s.length; i++) {
      const diff = withOpd.s_grad![i]! - withoutOpd.s_grad![i]!
      close(diff, 0.01 * ref.grad[i]!, 1e-12, `token ${i}: OPD share of the gradient`)
      if (b.sampleMask[Math.floor(i / b.T)] === 0) assert.equal(Math.abs(diff), 0, `masked token ${i}`)
    }
  })

  it('GRPO terms alone leave the teacher out of the graph', async () => {
    const b = randomBatch(21)
    const grpo = { ...SEED_CONFIG, terms: { kl: true, entropy: true, opd: false } }
    const out = await runTerm(engine, actorBuild(grpo), b)
    const expected = refActor(b, { klCoef: 0.01, entropyCoef: 0.001, opdCoef: 0 })
    close(out.loss![0]!, expected, 1e-12, 'loss')
  })

  for (const name of ALGORITHM_NAMES) {
    const terms = ALGORITHMS[name].loss
    if (!terms) continue
    it(`row ${name}: the loss has exactly the row's terms, each non-zero`, async () => {
      const b = randomBatch(23)
      const out = await runTerm(
        engine,
        (op, x) => {
          const r = actorLoss(op, actorInputs(x), { ...SEED_CONFIG, terms })
          const present: Record<string, typeof r.loss> = { loss: r.loss, term_pg: r.pg.loss }
          if (r.kl) present.term_kl = r.kl
          if (r.entropy) present.term_entropy = r.entropy
          if (r.opd) present.term_opd = r.opd.loss
          return present
        },
        b,
      )
      const on = ['pg', ...(['kl', 'entropy', 'opd'] as const).filter((t) => terms[t])].map((t) => `term_${t}`).sort()
      assert.deepEqual(
        Object.keys(out)
          .filter((k) => k !== 'loss')
          .sort(),
        on,
      )
      for (const term of on) assert.ok(Math.abs(out[term]![0]!) > 1e-6, `${term} = ${out[term]![0]}`)
      const coefficient = { kl: 0.01, entropy: -0.001, opd: 0.01 } as const
      const expected = (['kl', 'entropy', 'opd'] as const).reduce(
        (sum, t) => sum + (terms[t] ? coefficient[t] * out[`term_${t}`]![0]! : 0),
        out.term_pg![0]!,
      )
      close(out.loss![0]!, expected, 1e-12, "loss = the sum of the row's terms")
    })
  }

  it('float32 agrees with the float64 reference to float32 precision', async () => {
    const b = randomBatch(22)
    const out = await runTerm(engine, actorBuild(), b, { dtype: 'float32' })
    const expected = refActor(b, { klCoef: 0.01, entropyCoef: 0.001, opdCoef: 0.01 })
    close(out.loss![0]!, expected, 1e-5 * Math.max(1, Math.abs(expected)), 'loss')
  })

  it('refuses a term that is on without its inputs, naming the input', () => {
    const op = createBuilder(new Graph('bad'))
    const t = (name: string) => op.input(name, 'float32', ['B', 'T'])
    const x = { logProbs: t('s'), oldLogProbs: t('old'), advantages: t('adv'), mask: t('mask') }
    assert.throws(
      () => actorLoss(op, x, SEED_CONFIG),
      (e: unknown) => e instanceof LossConfigError && /entropy was not given/.test(e.message),
    )
    assert.throws(
      () => actorLoss(op, { ...x, entropy: t('h') }, SEED_CONFIG),
      (e: unknown) => e instanceof LossConfigError && /teacherLogProbs/.test(e.message),
    )
  })

  it('refuses mismatched dtypes and shapes with the offending values in the message', () => {
    const op = createBuilder(new Graph('bad'))
    const s = op.input('s', 'float32', ['B', 'T'])
    const old = op.input('old', 'float64', ['B', 'T'])
    assert.throws(
      () => ppoClipLoss(op, { logProbs: s, oldLogProbs: old, advantages: s, mask: s }),
      (e: unknown) =>
        e instanceof SeedInputError && e.message.includes('oldLogProbs must be float32[B, T], got float64'),
    )
    const flat = op.input('m', 'float32', ['B', 'T'])
    assert.throws(
      () => opdLoss(op, { logProbs: s, teacherLogProbs: s, mask: s, sampleMask: flat }),
      (e: unknown) =>
        e instanceof SeedInputError && e.message.includes('sampleMask must be float32[B], got float32[B, T]'),
    )
    assert.throws(
      () => actorLoss(op, { logProbs: s, oldLogProbs: s, advantages: s, mask: s }, { ...SEED_CONFIG, opdCoef: -1 }),
      (e: unknown) => e instanceof LossConfigError && e.message.includes('opdCoef must be a finite number ≥ 0, got -1'),
    )
  })
})
