/** A seeded source of uniform numbers in [0, 1). */
export interface UniformSource {
  next(): number
}

export interface TokenChoice {
  token: number
  /** log π(token) under the temperature-scaled distribution (before any top-p cut), as score and train see it. */
  logprob: number
}

/**
 * Draws one token from a row of log-probabilities (already log-softmax of logits / temperature).
 * Top-p keeps the smallest set of most likely tokens whose mass reaches `topP` and renormalises over it;
 * the returned log-prob stays the untruncated one, so sampler, score and train graphs agree at θ = π_old.
 */
export function sampleFromLogprobs(logprobs: Float32Array, topP: number, rng: UniformSource): TokenChoice {
  const V = logprobs.length
  if (V === 0) throw new RangeError('sampleFromLogprobs: empty distribution')
  if (!(topP > 0 && topP <= 1)) throw new RangeError(`top-p must be in (0, 1], got ${topP}`)
  if (topP >= 1) {
    let u = rng.next()
    let last = 0
    for (let v = 0; v < V; v++) {
      const p = Math.exp(logprobs[v] as number)
      if (p <= 0) continue
      last = v
      u -= p
      if (u < 0) return { token: v, logprob: logprobs[v] as number }
    }
    return { token: last, logprob: logprobs[last] as number } // rounding left a sliver of mass
  }
  // nucleus: most likely first; only tokens with non-negligible mass are sorted
  const candidates: number[] = []
  for (let v = 0; v < V; v++) if ((logprobs[v] as number) > -30) candidates.push(v)
  candidates.sort((a, b) => (logprobs[b] as number) - (logprobs[a] as number) || a - b)
  let mass = 0
  let keep = 0
  while (keep < candidates.length && mass < topP) mass += Math.exp(logprobs[candidates[keep++] as number] as number)
  let u = rng.next() * mass
  for (let i = 0; i < keep; i++) {
    const v = candidates[i] as number
    u -= Math.exp(logprobs[v] as number)
    if (u < 0) return { token: v, logprob: logprobs[v] as number }
  }
  const v = candidates[keep - 1] as number
  return { token: v, logprob: logprobs[v] as number }
}

/** The index of the most likely token (greedy decoding); ties go to the lower id. */
export function argmax(logprobs: Float32Array): TokenChoice {
  let best = 0
  for (let v = 1; v < logprobs.length; v++) if ((logprobs[v] as number) > (logprobs[best] as number)) best = v
  return { token: best, logprob: logprobs[best] as number }
}

/** The earliest end of a stop string in `text`, or -1. */
export function stopIndex(text: string, stops: readonly string[]): number {
  let end = -1
  for (const stop of stops) {
    const at = text.indexOf(stop)
    if (at >= 0 && (end < 0 || at + stop.length < end)) end = at + stop.length
  }
  return end
}
