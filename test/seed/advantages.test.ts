import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  groupAdvantages,
  PAPER_STATISTICS,
  SeedInputError,
  type StepSamples,
  stepScore,
  tokenAdvantages,
} from '../../seed/index.ts'

// group g1: trajectory a won (reward 1) with steps valid, valid, invalid; trajectory b lost with steps valid, invalid
// group g2: one sample; group g3: two equal scores
const SAMPLES: StepSamples = {
  scores: [
    stepScore(1, true),
    stepScore(1, true),
    stepScore(1, false),
    stepScore(0, true),
    stepScore(0, false),
    1,
    1,
    1,
  ],
  groups: ['g1', 'g1', 'g1', 'g1', 'g1', 'g2', 'g3', 'g3'],
  trajectories: ['a', 'a', 'a', 'b', 'b', 'c', 'd', 'e'],
}

const closeAll = (actual: ArrayLike<number>, expected: number[], tol = 1e-12) => {
  assert.equal(actual.length, expected.length)
  for (let i = 0; i < expected.length; i++) {
    assert.ok(Math.abs(actual[i]! - expected[i]!) <= tol, `[${i}] ${actual[i]} vs ${expected[i]}`)
  }
}

describe('group advantages', () => {
  it('scores a step as the episode reward minus 0.1 when its action was invalid', () => {
    assert.equal(stepScore(10, true), 10)
    assert.equal(stepScore(0, false), -0.1)
  })

  it('mean mode subtracts the mean over all step samples of the group (hand-computed)', () => {
    // g1 pool [1, 1, 0.9, 0, −0.1]: μ = 0.56
    const a = groupAdvantages(SAMPLES, { mode: 'mean' })
    closeAll(a, [0.44, 0.44, 0.34, -0.56, -0.66, 1, 0, 0])
  })

  it('mean/std mode divides by the unbiased std plus 1e-6; a lone sample gets μ = 0, σ = 1', () => {
    // Σ(x−μ)² = 0.1936·2 + 0.1156 + 0.3136 + 0.4356 = 1.252, σ = √(1.252/4)
    const sigma = Math.sqrt(1.252 / 4)
    const a = groupAdvantages(SAMPLES, { mode: 'meanStd' })
    const d = sigma + 1e-6
    closeAll(a, [0.44 / d, 0.44 / d, 0.34 / d, -0.56 / d, -0.66 / d, 1 / (1 + 1e-6), 0, 0], 1e-9)
  })

  it("the paper's statistics pool one value per trajectory with the population std", () => {
    // g1: trajectories a (first score 1) and b (first score 0): μ = 0.5, population σ = 0.5
    const a = groupAdvantages(SAMPLES, { mode: 'meanStd', statistics: PAPER_STATISTICS })
    const d = 0.5 + 1e-6
    closeAll(a, [0.5 / d, 0.5 / d, 0.4 / d, -0.5 / d, -0.6 / d, 1 / (1 + 1e-6), 0, 0], 1e-9)
  })

  it('trajectory pooling with the unbiased std is the code switch compute_mean_std_cross_steps=False', () => {
    const a = groupAdvantages(SAMPLES, { mode: 'meanStd', statistics: { pool: 'trajectories', std: 'unbiased' } })
    const d = Math.SQRT1_2 + 1e-6
    closeAll(a.subarray(0, 5), [0.5 / d, 0.5 / d, 0.4 / d, -0.5 / d, -0.6 / d], 1e-9)
  })

  it('longer trajectories weigh more under step pooling than under trajectory pooling', () => {
    const long: StepSamples = { scores: [1, 1, 1, 1, 0], groups: [0, 0, 0, 0, 0], trajectories: [0, 0, 0, 0, 1] }
    const steps = groupAdvantages(long, { mode: 'mean' })
    const trajectories = groupAdvantages(long, { mode: 'mean', statistics: PAPER_STATISTICS })
    closeAll(steps, [0.2, 0.2, 0.2, 0.2, -0.8])
    closeAll(trajectories, [0.5, 0.5, 0.5, 0.5, -0.5])
  })

  it('rejects mismatched lengths and non-finite scores with the values in the message', () => {
    assert.throws(
      () => groupAdvantages({ scores: [1, 2], groups: [0], trajectories: [0, 1] }, { mode: 'mean' }),
      (e: unknown) => e instanceof SeedInputError && e.message.includes('2 scores, 1 group ids and 2 trajectory ids'),
    )
    assert.throws(
      () => groupAdvantages({ scores: [1, Number.NaN], groups: [0, 0], trajectories: [0, 1] }, { mode: 'mean' }),
      (e: unknown) => e instanceof SeedInputError && e.message.includes('score 1 is NaN'),
    )
  })

  it('broadcasts A_i to response tokens only', () => {
    const t = tokenAdvantages([0.5, -2], [1, 1, 0, 1, 0, 0], 3)
    assert.deepEqual(Array.from(t), [0.5, 0.5, 0, -2, 0, 0])
    assert.throws(() => tokenAdvantages([1], [1, 1], 3), /mask has 2 entries, not 1×3/)
  })
})
