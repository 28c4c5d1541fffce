import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { checkOverrides, deepMerge, effectiveConfig } from '../../seed/hyperparameters.ts'
import { microConfig } from '../compute/micro.ts'

const config = microConfig()

describe('hyperparameter overrides', () => {
  it('accepts stage2 training settings and accumulates them over earlier overrides', () => {
    const first = checkOverrides(config, {}, { stage2: { lr: 1e-4 } })
    assert.ok(first.ok)
    const second = checkOverrides(config, first.cumulative, { stage2: { clipHigh: 0.3 } })
    assert.ok(second.ok)
    assert.deepEqual(second.overrides, { stage2: { clipHigh: 0.3 } })
    assert.deepEqual(second.cumulative, { stage2: { lr: 1e-4, clipHigh: 0.3 } })
    const effective = effectiveConfig(config, second.cumulative) as typeof config
    assert.equal(effective.stage2.lr, 1e-4)
    assert.equal(effective.stage2.clipHigh, 0.3)
    assert.equal(effective.stage2.groupSize, config.stage2.groupSize)
    assert.equal(config.stage2.clipHigh !== 0.3, true, 'the run config itself is unchanged')
  })

  it('rejects with every bad field path: bad values, plan fields, unknown fields, cross-field rules', () => {
    const bad = checkOverrides(config, {}, { stage2: { lr: -1, iterations: 3, bogus: 1 }, env: 'chess' })
    assert.ok(!bad.ok)
    const paths = bad.problems.map((p) => p.slice(0, p.indexOf(':')))
    assert.deepEqual(paths.sort(), ['env', 'stage2.bogus', 'stage2.iterations', 'stage2.lr'])
    assert.match(bad.problems.find((p) => p.startsWith('stage2.iterations')) ?? '', /cannot change during a run/)
    const crossField = checkOverrides(config, {}, { stage2: { miniBatchSize: 10_000 } })
    assert.ok(!crossField.ok)
    assert.match(crossField.problems[0] ?? '', /^stage2\.miniBatchSize: 10000 samples per mini-batch/)
    const notObject = checkOverrides(config, {}, 5)
    assert.ok(!notObject.ok)
    assert.match(notObject.problems[0] ?? '', /^\(root\): /)
  })

  it('accepts a learning rate above 1: divergence is caught by the update, not by a cap', () => {
    assert.ok(checkOverrides(config, {}, { stage2: { lr: 1e12 } }).ok)
    assert.ok(!checkOverrides(config, {}, { stage2: { lr: Number.POSITIVE_INFINITY } }).ok)
  })

  it('merges objects key by key and replaces scalars and arrays', () => {
    assert.deepEqual(deepMerge({ a: { b: 1, c: [1, 2] }, d: 1 }, { a: { c: [3] }, e: 2 }), {
      a: { b: 1, c: [3] },
      d: 1,
      e: 2,
    })
  })
})
