import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { iterationMetrics } from '../../records/iteration-metrics.ts'

const rollout = (episodes: number, successRate: number, promptsTruncated: number, seconds: number) => ({
  episodes,
  successRate,
  stepSamples: 3 * episodes,
  promptsTruncated,
  seconds,
})

describe('iteration metrics', () => {
  it('weights rates by what they are rates of, so sharding does not change them', () => {
    const m = iterationMetrics({
      rollout: [rollout(4, 0.5, 1, 2), rollout(2, 0, 3, 1.5)],
      analyze: [
        { skills: 4, parsed: 3, truncated: 2, placeholders: 2 },
        { skills: 2, parsed: 0, truncated: 0, placeholders: 0 },
      ],
    })
    assert.equal(m['rollout/success_rate'], 2 / 6)
    assert.equal(m['rollout/episodes'], 6)
    assert.equal(m['analyze/parse_rate'], 3 / 6)
    assert.equal(m['analyze/parsed'], 3)
    assert.equal(m['analyze/placeholder_rate'], 2 / 6)
  })

  it('adds up truncation counts and compute seconds over shards', () => {
    const m = iterationMetrics({
      rollout: [rollout(4, 0.5, 1, 2), rollout(2, 0, 3, 1.5)],
      rescore: [{ teacherPrompts: 9, teacherPromptsTruncated: 4, teacherBlocksDropped: 1, seconds: 0.25 }],
    })
    assert.equal(m['rollout/prompts_truncated'], 4)
    assert.equal(m['rescore/teacher_prompts_truncated'], 4)
    assert.equal(m['rescore/teacher_blocks_dropped'], 1)
    assert.equal(m['timing/rollout_s'], 3.5)
    assert.equal(m['timing/rescore_s'], 0.25)
  })

  it('is null where a phase did not run or nothing was distilled, never NaN', () => {
    const m = iterationMetrics({
      rollout: [rollout(4, 0.25, 0, 1)],
      analyze: [],
      update: [{ samples: 12, loss: 0.5, gradNorm: 0.1, opdTokens: 0 }],
    })
    assert.equal(m['analyze/parse_rate'], null)
    assert.equal(m['analyze/prompts_truncated'], null)
    assert.equal(m['update/opd_tokens'], 0)
    assert.equal(m['update/opd_gate_mean'], null)
    assert.equal(m['update/opd_positive_gap_share'], null)
    assert.equal(m['update/loss'], 0.5)
    assert.equal(m['update/grad_norm'], 0.1)
    assert.equal(m['timing/update_s'], null)
    for (const [name, v] of Object.entries(m)) assert.ok(v === null || Number.isFinite(v), `${name}: ${v}`)
  })

  it('takes the OPD gate statistics as token means over the distilled tokens', () => {
    const m = iterationMetrics({
      update: [{ samples: 8, opdTokens: 30, opdGateMean: 0.6, opdPositiveGapShare: 0.4, opdGapMean: 0.1 }],
    })
    assert.equal(m['update/opd_tokens'], 30)
    assert.equal(m['update/opd_gate_mean'], 0.6)
    assert.equal(m['update/opd_positive_gap_share'], 0.4)
    assert.equal(m['update/opd_gap_mean'], 0.1)
  })
})
