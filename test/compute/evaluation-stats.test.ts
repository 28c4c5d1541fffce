// The interval math of evaluation-stats.ts against values computed by hand (formulas in each comment).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  aggregateEvaluation,
  type Estimate,
  macroInterval,
  meanInterval,
  ratioInterval,
  wilson,
} from '../../compute/evaluation-stats.ts'

function near(e: Estimate, value: number, low: number | null, high: number | null, tol = 5e-5): void {
  assert.ok(Math.abs(e.value - value) < tol, `value ${e.value} vs ${value}`)
  for (const [got, want] of [
    [e.low, low],
    [e.high, high],
  ] as const) {
    if (want === null) assert.equal(got, null)
    else assert.ok(got !== null && Math.abs(got - want) < tol, `bound ${got} vs ${want}`)
  }
}

describe('evaluation intervals', () => {
  it('Wilson: 8 of 10 gives [0.4902, 0.9433]', () => {
    // centre (0.8 + 1.96²/20) / (1 + 1.96²/10) = 0.7167, half 0.2266
    near(wilson(8, 10), 0.8, 0.49016, 0.94331)
  })

  it('Wilson: 0 of 10 gives [0, 0.2775] (never a zero-width interval)', () => {
    near(wilson(0, 10), 0, 0, 0.27753)
  })

  it('Wilson: no tasks gives no interval', () => {
    near(wilson(0, 0), 0, null, null)
  })

  it('mean of 1, 2, 3, 4: 2.5 ± 1.96·√(1.6667/4) = [1.2348, 3.7652]', () => {
    near(meanInterval([1, 2, 3, 4]), 2.5, 1.23484, 3.76516)
  })

  it('mean of one value has no interval', () => {
    near(meanInterval([7]), 7, null, null)
  })

  it('macro of 5/10 and 2/4: 0.5 ± 1.96·√((0.25/10 + 0.25/4)/4) = [0.2101, 0.7899]', () => {
    near(
      macroInterval([
        { successes: 5, tasks: 10 },
        { successes: 2, tasks: 4 },
      ]),
      0.5,
      0.21011,
      0.78989,
    )
  })

  it('invalid ratio 2/8 over episodes (1,2), (0,2), (1,4): 0.25 ± 1.96·√(0.5/(3·2·(8/3)²)) = [0.0378, 0.4622]', () => {
    near(
      ratioInterval([
        { a: 1, b: 2 },
        { a: 0, b: 2 },
        { a: 1, b: 4 },
      ]),
      0.25,
      0.03783,
      0.46217,
    )
  })

  it('bounds a ratio of 0 or 1 by the Wilson interval over episodes, not a zero-width interval', () => {
    const none = ratioInterval(Array.from({ length: 10 }, () => ({ a: 0, b: 12 })))
    near(none, 0, 0, 0.27753) // Wilson 0 of 10
    assert.equal(none.n, 120)
    near(ratioInterval(Array.from({ length: 10 }, () => ({ a: 3, b: 3 }))), 1, 0.72247, 1)
  })

  it('aggregates task records per family and overall', () => {
    const a = aggregateEvaluation([
      { seed: 0, family: 'x', success: true, score: 1, steps: 2, invalidSteps: 1 },
      { seed: 1, family: 'y', success: false, score: 0, steps: 2, invalidSteps: 0 },
      { seed: 2, family: 'x', success: false, score: 0.5, steps: 4, invalidSteps: 1 },
    ])
    assert.equal(a.tasks, 3)
    assert.deepEqual(Object.keys(a.perFamily), ['x', 'y'])
    assert.equal(a.perFamily.x?.tasks, 2)
    assert.equal(a.perFamily.x?.success.value, 0.5)
    assert.equal(a.success.value, 1 / 3)
    assert.equal(a.macroSuccess.value, 0.25)
    assert.equal(a.score.value, 0.5)
    assert.equal(a.length.value, 8 / 3)
    near(a.invalidRate, 0.25, 0.03783, 0.46217)
  })
})
