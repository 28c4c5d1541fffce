import type { ModelConfig } from './config.ts'
import { parameterSpecs } from './parameters.ts'
import type { UniformSource } from './sampling.ts'

/** Fresh weights: N(0, std²) matrices (Box–Muller over the seeded source), ones for norms, zeros for biases. */
export function initWeights(c: ModelConfig, rng: UniformSource, std = 0.02): Map<string, Float32Array> {
  const weights = new Map<string, Float32Array>()
  for (const spec of parameterSpecs(c)) {
    const w = new Float32Array(spec.shape.reduce((a, b) => a * b, 1))
    if (spec.init === 'ones') w.fill(1)
    else if (spec.init === 'normal') {
      for (let i = 0; i < w.length; i += 2) {
        const r = Math.sqrt(-2 * Math.log(1 - rng.next())) * std
        const theta = 2 * Math.PI * rng.next()
        w[i] = r * Math.cos(theta)
        if (i + 1 < w.length) w[i + 1] = r * Math.sin(theta)
      }
    }
    weights.set(spec.name, w)
  }
  return weights
}
