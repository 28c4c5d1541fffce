import type { ModelConfig } from './config.ts'

/** Rotary tables (positions × D), each half repeated (rotate-half convention), as Hugging Face computes them. */
export function ropeTables(c: ModelConfig, positions: number): { cos: Float64Array; sin: Float64Array } {
  const D = c.headDim
  const half = D / 2
  const cos = new Float64Array(positions * D)
  const sin = new Float64Array(positions * D)
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      const angle = p / c.ropeTheta ** ((2 * i) / D)
      for (const j of [i, i + half]) {
        cos[p * D + j] = Math.cos(angle)
        sin[p * D + j] = Math.sin(angle)
      }
    }
  }
  return { cos, sin }
}
