// The SEED loss terms (docs/algorithm.md §6), built as engine subgraphs. Each function takes the builder and
// per-token Values of shape (B, T) in one float dtype, with `logProbs` = log π_θ of the sampled tokens as the
// train graph computes them (carrying the gradient), and returns scalar Values. The constants are the released
// code's: PPO-clip with dual clip, k3 KL clamped at its output, SDAR's sigmoid gate for OPD, verl's masked means
// with a 1e-8 guard. seedflow adds one guard of its own, on by default (docs/algorithm.md §6.2, §6.4): the log-ratios
// are clamped to ±20 before exp, in the PPO ratio and inside the KL; `clampLogRatios: false` is the reference's plain exp.
import type { Builder, Value } from '../engine/index.ts'
import { LossConfigError, SeedInputError } from './errors.ts'

export const LOSS_CONSTANTS = {
  /** PPO clip range ε (low and high). */
  clipLow: 0.2,
  clipHigh: 0.2,
  /** Dual-clip bound for A < 0 (`clip_ratio_c`). */
  clipRatioC: 3.0,
  /**
   * seedflow's guard (not the reference's): log π_θ − log π_old (PPO) and ref − log π_θ (k3 KL) are clamped to
   * ±this before exp, so an overflowing exp never turns a clipped gradient into 0·∞ = NaN.
   */
  logRatioClamp: 20,
  /** k3 KL: the KL value is clamped to ±this (the reference's only clamp of the KL). */
  klValueClamp: 10,
  /** OPD gate sharpness β. */
  opdBeta: 5.0,
  /** Added to every mask sum (verl's masked_mean): an empty mask gives 0, never 0/0. */
  maskEpsilon: 1e-8,
} as const

/** Stage 2 coefficients of the combined loss (docs/algorithm.md §6.4, §6.5, §7). */
export const DEFAULT_COEFFICIENTS = { klCoef: 0.01, entropyCoef: 0.001, opdCoef: 0.01 } as const

/**
 * How a (B, T) loss matrix becomes a scalar (verl's `loss_agg_mode`). `token-mean` is the code's setting;
 * `seq-mean-token-mean` is the paper's 1/G Σ 1/|o_i| Σ_t form (with the mask guard added per row).
 */
export const AGGREGATIONS = ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum'] as const
export type Aggregation = (typeof AGGREGATIONS)[number]

export interface TokenMask {
  /** 1 on response tokens, 0 on padding; (B, T). */
  mask: Value
  /**
   * When the graph sees one part of a batch (a micro-batch, policy/trainer.ts): Σ mask over the whole batch, the
   * token means' denominator, so that the parts' losses and diagnostics add up to the batch's. Absent: this graph's.
   */
  maskTotal?: Value
  /** The same for the means over sequences: the whole batch's number of rows. */
  rowsTotal?: Value
}

/** Σ(x·mask) / (Σmask + ε), or over `total` (the whole batch's Σmask, TokenMask.maskTotal): a scalar. */
export function maskedMean(op: Builder, x: Value, mask: Value, total?: Value): Value {
  const sum = op.ReduceSum(op.Mul(x, mask), undefined, { keepdims: 0 })
  return op.Div(sum, op.Add(total ?? op.ReduceSum(mask, undefined, { keepdims: 0 }), LOSS_CONSTANTS.maskEpsilon))
}

/** The mean of a (B) vector over its rows, or over `rows` (the whole batch's, TokenMask.rowsTotal). */
function rowMean(op: Builder, v: Value, rows?: Value): Value {
  return rows ? op.Div(op.ReduceSum(v, undefined, { keepdims: 0 }), rows) : op.ReduceMean(v, undefined, { keepdims: 0 })
}

/** One scalar from a (B, T) loss matrix (over the whole batch's `totals` when given: TokenMask). */
export function aggregate(
  op: Builder,
  lossMat: Value,
  mask: Value,
  mode: Aggregation = 'token-mean',
  totals: Pick<TokenMask, 'maskTotal' | 'rowsTotal'> = {},
): Value {
  switch (mode) {
    case 'token-mean':
      return maskedMean(op, lossMat, mask, totals.maskTotal)
    case 'seq-mean-token-mean': {
      const rows = op.ReduceSum(op.Mul(lossMat, mask), [1], { keepdims: 0 }) // (B)
      const lengths = op.Add(op.ReduceSum(mask, [1], { keepdims: 0 }), LOSS_CONSTANTS.maskEpsilon) // (B)
      return rowMean(op, op.Div(rows, lengths), totals.rowsTotal)
    }
    case 'seq-mean-token-sum':
      return rowMean(op, op.ReduceSum(op.Mul(lossMat, mask), [1], { keepdims: 0 }), totals.rowsTotal)
    default:
      throw new LossConfigError(`unknown aggregation ${JSON.stringify(mode)}; expected one of ${AGGREGATIONS}`)
  }
}

// ---- PPO clipped surrogate (docs/algorithm.md §6.2) ----

export interface PpoInputs extends TokenMask {
  logProbs: Value
  oldLogProbs: Value
  /** A_i broadcast to the response tokens; (B, T). */
  advantages: Value
}

export interface PpoOptions {
  clipLow?: number
  clipHigh?: number
  clipRatioC?: number
  aggregation?: Aggregation
  /** Clamp the log-ratio to ±LOSS_CONSTANTS.logRatioClamp before exp (seedflow's default); false: plain exp. */
  clampLogRatio?: boolean
}

export interface PpoTerm {
  loss: Value
  /** Share of response tokens where the clipped branch is larger (the update is clipped). */
  clipFraction: Value
  /** Share of response tokens with A < 0 where the dual clip bound −A·c is the smaller one. */
  clipFractionLower: Value
  /** Masked mean of log π_old − log π_θ (clamped where the ratio is): verl's ppo_kl. */
  approxKl: Value
}

/**
 * loss_tok = max(−A·r, −A·clip(r, 1−ε, 1+ε)), and for A < 0 additionally min(that, −A·c), with
 * r = exp(clamp(log π_θ − log π_old, ±20)), or the reference's plain exp with `clampLogRatio: false`.
 */
export function ppoClipLoss(op: Builder, x: PpoInputs, options: PpoOptions = {}): PpoTerm {
  const { logProbs: s, oldLogProbs: old, advantages: a, mask } = x
  checkTokens('ppoClipLoss', { logProbs: s, oldLogProbs: old, advantages: a, mask })
  const clipLow = options.clipLow ?? LOSS_CONSTANTS.clipLow
  const clipHigh = options.clipHigh ?? LOSS_CONSTANTS.clipHigh
  const c = options.clipRatioC ?? LOSS_CONSTANTS.clipRatioC
  if (!(c > 1)) throw new LossConfigError(`ppoClipLoss: clipRatioC must be > 1 for dual clip, got ${c}`)
  if (!(clipLow > 0 && clipLow < 1 && clipHigh > 0)) {
    throw new LossConfigError(
      `ppoClipLoss: clip range must satisfy 0 < low < 1 and high > 0, got ${clipLow}/${clipHigh}`,
    )
  }
  return op.scope('ppo', () => {
    const logRatio = clampLogRatio(op, op.Sub(s, old), options.clampLogRatio) // (B, T)
    const ratio = op.Exp(logRatio)
    const negA = op.Neg(a)
    const unclipped = op.Mul(negA, ratio)
    const clipped = op.Mul(negA, op.Clip(ratio, 1 - clipLow, 1 + clipHigh))
    const pessimistic = op.Max(unclipped, clipped)
    const dualBound = op.Mul(negA, c)
    const negative = op.Less(a, 0)
    const perToken = op.Where(negative, op.Min(dualBound, pessimistic), pessimistic)
    const dtype = s.dtype
    const total = x.maskTotal
    return {
      loss: aggregate(op, perToken, mask, options.aggregation, x),
      clipFraction: maskedMean(op, op.Cast(op.Greater(clipped, unclipped), dtype), mask, total),
      clipFractionLower: maskedMean(
        op,
        op.Mul(op.Cast(op.Greater(pessimistic, dualBound), dtype), op.Cast(negative, dtype)),
        mask,
        total,
      ),
      approxKl: maskedMean(op, op.Neg(logRatio), mask, total),
    }
  })
}

// ---- KL to the reference and entropy (docs/algorithm.md §6.4) ----

export interface KlInputs extends TokenMask {
  logProbs: Value
  refLogProbs: Value
}

/** The log-ratio clamped to ±LOSS_CONSTANTS.logRatioClamp (seedflow's guard, on unless `clamp` is false). */
function clampLogRatio(op: Builder, logRatio: Value, clamp = true): Value {
  const bound = LOSS_CONSTANTS.logRatioClamp
  return clamp ? op.Clip(logRatio, -bound, bound) : logRatio
}

/**
 * k3 (`low_var_kl`): d = clamp(ref − log π_θ, ±20), kl = clamp(eᵈ − d − 1, ±10), aggregated; with
 * `clampLogRatio: false` d is not clamped (the reference, which clamps only the KL value).
 */
export function klLoss(
  op: Builder,
  x: KlInputs,
  options: { aggregation?: Aggregation; clampLogRatio?: boolean } = {},
): { loss: Value } {
  checkTokens('klLoss', { logProbs: x.logProbs, refLogProbs: x.refLogProbs, mask: x.mask })
  return op.scope('kl', () => {
    const outer = LOSS_CONSTANTS.klValueClamp
    const d = clampLogRatio(op, op.Sub(x.refLogProbs, x.logProbs), options.clampLogRatio)
    const kl = op.Clip(op.Sub(op.Sub(op.Exp(d), d), 1), -outer, outer) // (B, T)
    return { loss: aggregate(op, kl, x.mask, options.aggregation, x) }
  })
}

export interface EntropyInputs extends TokenMask {
  /** Per-token entropy of π_θ, computed in the train graph from the logits; (B, T). */
  entropy: Value
}

/** The mean entropy H (the combined loss subtracts entropy_coeff·H). */
export function entropyTerm(
  op: Builder,
  x: EntropyInputs,
  options: { aggregation?: Aggregation } = {},
): { loss: Value } {
  checkTokens('entropyTerm', { entropy: x.entropy, mask: x.mask })
  return op.scope('entropy', () => ({
    loss: aggregate(op, x.entropy, x.mask, options.aggregation, x),
  }))
}

// ---- gated on-policy distillation (docs/algorithm.md §6.3) ----

/**
 * What the OPD gate compares the teacher with. `student`: the live student on the ordinary prompt (the reference,
 * g = σ(β·(t − s))). `control`: π_old on the same prompt carrying another task's skill block
 * (g = σ(β·(t − c))), so the gate measures what this skill adds over any skill block (seedflow's switch).
 */
export const OPD_GATES = ['student', 'control'] as const
export type OpdGate = (typeof OPD_GATES)[number]

export interface OpdInputs extends TokenMask {
  /** log π_θ of the sampled tokens on the ordinary prompt (the student, live). */
  logProbs: Value
  /** log π_k of the same tokens on the skill-augmented prompt (the teacher, fixed); (B, T). */
  teacherLogProbs: Value
  /** With the `control` gate: log π_k of the same tokens on the prompt with a control skill block; (B, T). */
  controlLogProbs?: Value
  /** 1 for step samples of analyzed trajectories, 0 otherwise; (B). */
  sampleMask: Value
  /** With TokenMask's totals: Σ mask·sampleMask over the whole batch (its distilled tokens). */
  distilledTotal?: Value
}

export interface OpdTerm {
  loss: Value
  /** Masked mean of the gate σ(β·gap). */
  gateMean: Value
  /** Share of distilled tokens whose gap is positive (gate > 0.5). */
  positiveGapShare: Value
  /** Masked mean of the gap: t − s, or t − c with the control gate. */
  gapMean: Value
  /** Distilled tokens over all B·T positions, padding included. */
  activeTokenShare: Value
}

/**
 * gap = t − sg(s), g = sg(σ(β·gap)), l = (g − b)·(t − s), averaged over response tokens of analyzed samples:
 * ∂l/∂s = −(g − b), a gate-weighted NLL on the sampled tokens. No clipping, no ratio, no gap normalization.
 * The reference has b = 0; `gateBaseline` b ∈ [0, 1) subtracts a constant from the gate (seedflow's switch).
 * With `gate: 'control'` the gap is t − c (both fixed); the loss and its gradient keep their form.
 */
export function opdLoss(
  op: Builder,
  x: OpdInputs,
  options: { beta?: number; gateBaseline?: number; gate?: OpdGate; aggregation?: Aggregation } = {},
): OpdTerm {
  const gateKind = options.gate ?? 'student'
  if (!OPD_GATES.includes(gateKind))
    throw new LossConfigError(`opdLoss: unknown gate ${JSON.stringify(gateKind)}; expected one of ${OPD_GATES}`)
  if (gateKind === 'control' && !x.controlLogProbs)
    throw new LossConfigError('opdLoss: the control gate needs controlLogProbs')
  checkTokens('opdLoss', {
    logProbs: x.logProbs,
    teacherLogProbs: x.teacherLogProbs,
    mask: x.mask,
    ...(gateKind === 'control' ? { controlLogProbs: x.controlLogProbs as Value } : {}),
  })
  const beta = options.beta ?? LOSS_CONSTANTS.opdBeta
  if (!(beta > 0)) throw new LossConfigError(`opdLoss: beta must be > 0, got ${beta}`)
  const baseline = options.gateBaseline ?? 0
  if (!(baseline >= 0 && baseline < 1))
    throw new LossConfigError(`opdLoss: gateBaseline must be in [0, 1), got ${baseline}`)
  const m = x.sampleMask
  if (m.dtype !== x.logProbs.dtype || m.shape.length !== 1) {
    throw new SeedInputError(
      `opdLoss: sampleMask must be ${x.logProbs.dtype}[B], got ${m.dtype}[${m.shape.join(', ')}]`,
    )
  }
  return op.scope('opd', () => {
    const mask = op.Mul(x.mask, op.Unsqueeze(m, [1])) // (B, T)
    const teacher = op.stopGradient(x.teacherLogProbs)
    const base = gateKind === 'control' ? (x.controlLogProbs as Value) : x.logProbs
    const gap = op.Sub(teacher, op.stopGradient(base))
    const gate = op.stopGradient(op.Sigmoid(op.Mul(gap, beta)))
    const weight = baseline === 0 ? gate : op.Sub(gate, baseline)
    const perToken = op.Mul(weight, op.Sub(teacher, x.logProbs))
    const dtype = x.logProbs.dtype
    const active = op.Cast(op.Greater(mask, 0), dtype)
    const total = x.distilledTotal
    return {
      loss: aggregate(op, perToken, mask, options.aggregation, { maskTotal: total, rowsTotal: x.rowsTotal }),
      gateMean: maskedMean(op, gate, mask, total),
      positiveGapShare: maskedMean(op, op.Cast(op.Greater(gap, 0), dtype), mask, total),
      gapMean: maskedMean(op, gap, mask, total),
      // over a part of a batch: every row has the same T, so the rows' means over the batch's rows
      activeTokenShare: x.rowsTotal
        ? rowMean(op, op.ReduceMean(active, [1], { keepdims: 0 }), x.rowsTotal)
        : op.ReduceMean(active, undefined, { keepdims: 0 }),
    }
  })
}

// ---- supervised fine-tuning (Stage 1, warm-start) ----

/** Negative log-likelihood of the response tokens, token-mean over the mask (loss on responses only). */
export function sftLoss(op: Builder, x: TokenMask & { logProbs: Value }): { loss: Value } {
  checkTokens('sftLoss', { logProbs: x.logProbs, mask: x.mask })
  return op.scope('sft', () => ({ loss: maskedMean(op, op.Neg(x.logProbs), x.mask) }))
}

// ---- the combined actor loss (docs/algorithm.md §6.5) ----

/** Which terms an algorithm row switches on (the PPO surrogate is always on in RL). */
export interface LossTerms {
  kl: boolean
  entropy: boolean
  opd: boolean
}

export interface ActorLossConfig {
  terms: LossTerms
  klCoef: number
  entropyCoef: number
  opdCoef: number
  /** The loss is divided by this (gradient-accumulation steps per mini-batch); default 1. */
  gradientAccumulation?: number
  aggregation?: Aggregation
  ppo?: Omit<PpoOptions, 'aggregation' | 'clampLogRatio'>
  opdBeta?: number
  /** b in the OPD term's (g − b)·(t − s); default 0 (the reference). */
  opdGateBaseline?: number
  /** What the gate compares the teacher with; default `student` (the reference). */
  opdGate?: OpdGate
  /** seedflow's ±20 clamp of the log-ratios before exp, in PPO and the KL (default true; false: the reference). */
  clampLogRatios?: boolean
}

export interface ActorLossInputs extends PpoInputs {
  refLogProbs?: Value
  entropy?: Value
  teacherLogProbs?: Value
  /** With the `control` gate. */
  controlLogProbs?: Value
  opdSampleMask?: Value
  /** With TokenMask's totals and the OPD term: the whole batch's distilled tokens (OpdInputs.distilledTotal). */
  distilledTotal?: Value
}

export interface ActorLoss {
  /** (L_pg − entropy_coeff·H + λ_opd·L_opd + kl_coef·L_kl) / gradientAccumulation */
  loss: Value
  pg: PpoTerm
  kl?: Value
  entropy?: Value
  opd?: OpdTerm
}

/**
 * L = L_pg − entropy_coeff·H + λ_opd·L_opd + kl_coef·L_kl, divided by the accumulation steps. A term that is
 * on is built (and its value returned) even with coefficient 0, but only added to L with a non-zero one.
 */
export function actorLoss(op: Builder, x: ActorLossInputs, config: ActorLossConfig): ActorLoss {
  const steps = config.gradientAccumulation ?? 1
  if (!(Number.isInteger(steps) && steps >= 1)) {
    throw new LossConfigError(`actorLoss: gradientAccumulation must be a positive integer, got ${steps}`)
  }
  for (const key of ['klCoef', 'entropyCoef', 'opdCoef'] as const) {
    if (!Number.isFinite(config[key]) || config[key] < 0) {
      throw new LossConfigError(`actorLoss: ${key} must be a finite number ≥ 0, got ${config[key]}`)
    }
  }
  const aggregation = config.aggregation ?? 'token-mean'
  const clampLogRatio = config.clampLogRatios ?? true
  const pg = ppoClipLoss(op, x, { ...config.ppo, aggregation, clampLogRatio })
  let total = pg.loss
  const result: ActorLoss = { loss: total, pg }
  if (config.terms.entropy) {
    const entropy = entropyTerm(
      op,
      { entropy: need(x.entropy, 'entropy'), mask: x.mask, maskTotal: x.maskTotal, rowsTotal: x.rowsTotal },
      { aggregation },
    ).loss
    result.entropy = entropy
    if (config.entropyCoef !== 0) total = op.Sub(total, op.Mul(entropy, config.entropyCoef))
  }
  if (config.terms.opd) {
    const opd = opdLoss(
      op,
      {
        logProbs: x.logProbs,
        teacherLogProbs: need(x.teacherLogProbs, 'teacherLogProbs'),
        sampleMask: need(x.opdSampleMask, 'opdSampleMask'),
        mask: x.mask,
        rowsTotal: x.rowsTotal,
        distilledTotal: x.distilledTotal,
        ...(config.opdGate === 'control' ? { controlLogProbs: need(x.controlLogProbs, 'controlLogProbs') } : {}),
      },
      {
        beta: config.opdBeta ?? LOSS_CONSTANTS.opdBeta,
        gateBaseline: config.opdGateBaseline ?? 0,
        gate: config.opdGate ?? 'student',
        aggregation,
      },
    )
    result.opd = opd
    if (config.opdCoef !== 0) total = op.Add(total, op.Mul(opd.loss, config.opdCoef))
  }
  if (config.terms.kl) {
    const kl = klLoss(
      op,
      {
        logProbs: x.logProbs,
        refLogProbs: need(x.refLogProbs, 'refLogProbs'),
        mask: x.mask,
        maskTotal: x.maskTotal,
        rowsTotal: x.rowsTotal,
      },
      { aggregation, clampLogRatio },
    ).loss
    result.kl = kl
    if (config.klCoef !== 0) total = op.Add(total, op.Mul(kl, config.klCoef))
  }
  result.loss = steps === 1 ? total : op.Div(total, steps)
  return result
}

function need(value: Value | undefined, name: string): Value {
  if (!value) throw new LossConfigError(`actorLoss: the term that uses ${name} is on, but ${name} was not given`)
  return value
}

/** Every per-token value is a (B, T) float of one dtype. */
function checkTokens(where: string, values: Record<string, Value>): void {
  const entries = Object.entries(values)
  const dtype = entries[0]![1].dtype
  if (dtype !== 'float32' && dtype !== 'float64' && dtype !== 'float16') {
    throw new SeedInputError(`${where}: per-token values must be float, got ${entries[0]![0]}: ${dtype}`)
  }
  for (const [name, v] of entries) {
    if (v.dtype !== dtype || v.shape.length !== 2) {
      throw new SeedInputError(
        `${where}: ${name} must be ${dtype}[B, T], got ${v.dtype}[${v.shape.join(', ')}] ` +
          `(${entries.map(([n, e]) => `${n}: ${e.dtype}[${e.shape.join(', ')}]`).join(', ')})`,
      )
    }
  }
}
