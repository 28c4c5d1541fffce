// Plain typed-array versions of the SEED loss terms: the test reference for the engine subgraphs in
// seed/losses.ts, written independently from the formulas of docs/algorithm.md §6 (scalar loops, float64).

export interface Batch {
  B: number
  T: number
  /** log π_θ, (B, T) row-major */
  s: Float64Array
  old: Float64Array
  ref: Float64Array
  teacher: Float64Array
  /** log π_old under a control skill block (the `control` OPD gate) */
  control: Float64Array
  adv: Float64Array
  mask: Float64Array
  entropy: Float64Array
  /** (B) */
  sampleMask: Float64Array
}

export type RefAggregation = 'token-mean' | 'seq-mean-token-mean' | 'seq-mean-token-sum'

const EPS = 1e-8
const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x))
const sigmoid = (x: number) => 1 / (1 + Math.exp(-x))

export function refAggregate(b: Batch, loss: (i: number) => number, mask: (i: number) => number, mode: RefAggregation) {
  if (mode === 'token-mean') return refMaskedMean(b, loss, mask)
  let sum = 0
  for (let r = 0; r < b.B; r++) {
    let row = 0
    let count = 0
    for (let t = 0; t < b.T; t++) {
      const i = r * b.T + t
      row += loss(i) * mask(i)
      count += mask(i)
    }
    sum += mode === 'seq-mean-token-mean' ? row / (count + EPS) : row
  }
  return sum / b.B
}

export function refMaskedMean(b: Batch, x: (i: number) => number, mask: (i: number) => number): number {
  let num = 0
  let den = 0
  for (let i = 0; i < b.B * b.T; i++) {
    num += x(i) * mask(i)
    den += mask(i)
  }
  return num / (den + EPS)
}

export function refPpo(b: Batch, mode: RefAggregation = 'token-mean', eps = 0.2, c = 3, clampLogRatio = true) {
  const perToken = new Float64Array(b.B * b.T)
  const clipped = new Float64Array(b.B * b.T)
  const lower = new Float64Array(b.B * b.T)
  const negLogRatio = new Float64Array(b.B * b.T)
  for (let i = 0; i < perToken.length; i++) {
    const logRatio = clampLogRatio ? clamp(b.s[i]! - b.old[i]!, -20, 20) : b.s[i]! - b.old[i]!
    const r = Math.exp(logRatio)
    const a = b.adv[i]!
    const l1 = -a * r
    const l2 = -a * clamp(r, 1 - eps, 1 + eps)
    const worse = Math.max(l1, l2)
    perToken[i] = a < 0 ? Math.min(-a * c, worse) : worse
    clipped[i] = l2 > l1 ? 1 : 0
    lower[i] = a < 0 && worse > -a * c ? 1 : 0
    negLogRatio[i] = -logRatio
  }
  const m = (i: number) => b.mask[i]!
  return {
    loss: refAggregate(b, (i) => perToken[i]!, m, mode),
    clipFraction: refMaskedMean(b, (i) => clipped[i]!, m),
    clipFractionLower: refMaskedMean(b, (i) => lower[i]!, m),
    approxKl: refMaskedMean(b, (i) => negLogRatio[i]!, m),
  }
}

export function refKl(b: Batch, mode: RefAggregation = 'token-mean') {
  const kl = (i: number) => {
    const d = clamp(b.ref[i]! - b.s[i]!, -20, 20)
    return clamp(Math.exp(d) - d - 1, -10, 10)
  }
  return refAggregate(b, kl, (i) => b.mask[i]!, mode)
}

export function refEntropy(b: Batch, mode: RefAggregation = 'token-mean') {
  return refAggregate(
    b,
    (i) => b.entropy[i]!,
    (i) => b.mask[i]!,
    mode,
  )
}

/**
 * The OPD term and, since the gate is held fixed, its exact gradient with respect to s. The gate's gap is t − s,
 * or t − c with the control gate; the loss is always g·(t − s).
 */
export function refOpd(
  b: Batch,
  beta = 5,
  mode: RefAggregation = 'token-mean',
  gateOn: 'student' | 'control' = 'student',
) {
  const n = b.B * b.T
  const mask = (i: number) => b.mask[i]! * b.sampleMask[Math.floor(i / b.T)]!
  const gap = (i: number) => b.teacher[i]! - (gateOn === 'control' ? b.control[i]! : b.s[i]!)
  const gate = (i: number) => sigmoid(beta * gap(i))
  let count = 0
  let active = 0
  for (let i = 0; i < n; i++) {
    count += mask(i)
    active += mask(i) > 0 ? 1 : 0
  }
  const grad = new Float64Array(n)
  if (mode === 'token-mean') for (let i = 0; i < n; i++) grad[i] = (-gate(i) * mask(i)) / (count + EPS)
  return {
    loss: refAggregate(b, (i) => gate(i) * (b.teacher[i]! - b.s[i]!), mask, mode),
    gateMean: refMaskedMean(b, gate, mask),
    positiveGapShare: refMaskedMean(b, (i) => (gap(i) > 0 ? 1 : 0), mask),
    gapMean: refMaskedMean(b, gap, mask),
    activeTokenShare: active / n,
    grad,
  }
}

export function refSft(b: Batch) {
  return refMaskedMean(
    b,
    (i) => -b.s[i]!,
    (i) => b.mask[i]!,
  )
}

export interface RefCoefficients {
  klCoef: number
  entropyCoef: number
  opdCoef: number
  beta?: number
  steps?: number
  gate?: 'student' | 'control'
}

export function refActor(b: Batch, c: RefCoefficients, mode: RefAggregation = 'token-mean') {
  const total =
    refPpo(b, mode).loss -
    c.entropyCoef * refEntropy(b, mode) +
    c.opdCoef * refOpd(b, c.beta ?? 5, mode, c.gate).loss +
    c.klCoef * refKl(b, mode)
  return total / (c.steps ?? 1)
}
