import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { argmax, sampleFromLogprobs, stopIndex, type UniformSource } from '../../policy/sampling.ts'

function lcg(seed: number): UniformSource {
  let s = seed >>> 0
  return {
    next: () => {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0
      return s / 4294967296
    },
  }
}

const probs = [0.5, 0.3, 0.15, 0.05]
const logprobs = Float32Array.from(probs.map(Math.log))

describe('sampling', () => {
  it('draws tokens with their probabilities (chi-square over 20,000 draws)', () => {
    const rng = lcg(7)
    const counts = [0, 0, 0, 0]
    const n = 20000
    for (let i = 0; i < n; i++) (counts[sampleFromLogprobs(logprobs, 1, rng).token] as number)++
    const chi2 = counts.reduce((acc, c, v) => acc + (c - n * (probs[v] as number)) ** 2 / (n * (probs[v] as number)), 0)
    assert.ok(chi2 < 16.3, `chi-square ${chi2.toFixed(2)} (3 dof, p = 0.001 at 16.3): ${counts}`)
  })

  it('keeps only the nucleus under top-p and returns the untruncated log-prob', () => {
    const rng = lcg(3)
    const seen = new Set<number>()
    for (let i = 0; i < 2000; i++) {
      const choice = sampleFromLogprobs(logprobs, 0.75, rng)
      seen.add(choice.token)
      assert.equal(choice.logprob, logprobs[choice.token])
    }
    assert.deepEqual([...seen].sort(), [0, 1]) // 0.5 + 0.3 reaches 0.75
  })

  it('is reproducible for the same seed', () => {
    const draw = (seed: number) => {
      const rng = lcg(seed)
      return Array.from({ length: 50 }, () => sampleFromLogprobs(logprobs, 0.9, rng).token)
    }
    assert.deepEqual(draw(11), draw(11))
    assert.notDeepEqual(draw(11), draw(12))
  })

  it('picks the most likely token greedily and finds the earliest stop string', () => {
    assert.deepEqual(argmax(logprobs), { token: 0, logprob: logprobs[0] })
    assert.equal(stopIndex('<action>up</action> trailing', ['</action>', 'zzz']), 19)
    assert.equal(stopIndex('nothing here', ['</action>']), -1)
  })

  it('rejects a top-p outside (0, 1]', () => {
    assert.throws(() => sampleFromLogprobs(logprobs, 0, lcg(1)), /top-p must be in \(0, 1\], got 0/)
  })
})
