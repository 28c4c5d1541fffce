// Update (docs/algorithm.md §6.1–§6.5): group advantages over step samples, then one pass of AdamW over
// mini-batches (ppo_epochs = 1, no shuffle) of the actor loss L_pg − c_H·H + λ·L_opd + c_KL·L_kl built into the
// policy's train graph. The OPD term sees only samples with a teacher (analyzed trajectories). With
// `padToMiniBatch` (the reference's padding, docs/algorithm.md §3) copies of random samples come first.
import type { AdamWState, Feeds, ModelHandle, Value } from '../engine/index.ts'
import { mulberry32 } from '../envs/rng.ts'
import type { LossBuilder } from '../policy/model.ts'
import { NonFiniteLossError, type TrainStepResult } from '../policy/trainer.ts'
import type { Stage2Config } from '../seed/config.ts'
import {
  type ActorLossInputs,
  actorLoss,
  CODE_STATISTICS,
  groupAdvantages,
  type LossTerms,
  type OpdGate,
  PAPER_STATISTICS,
  stepScore,
} from '../seed/index.ts'
import { CorePhaseError, type Policy } from './policy.ts'
import type { ScoredSample } from './rescore.ts'

export type UpdateSettings = Pick<
  Stage2Config,
  | 'lr'
  | 'weightDecay'
  | 'maxGradNorm'
  | 'miniBatchSize'
  | 'clipLow'
  | 'clipHigh'
  | 'clipRatioC'
  | 'klCoef'
  | 'entropyCoef'
  | 'opdCoef'
  | 'opdBeta'
  | 'opdGateBaseline'
  | 'opdGate'
  | 'advantageMode'
  | 'advantageStatistics'
  | 'perEpisodeWeight'
  | 'aggregation'
  | 'invalidPenalty'
  | 'temperature'
  | 'clampLogRatios'
  | 'padToMiniBatch'
>

export interface UpdateInput {
  samples: readonly ScoredSample[]
  /** The row's loss terms besides the PPO surrogate. */
  terms: LossTerms
  settings: UpdateSettings
  /** AdamW moments from the previous update (the run's optimizer state); absent: the trainer's own. */
  optimizerState?: AdamWState
  /** Seeds which samples `padToMiniBatch` copies (required with it). */
  seed?: number
  /** Called after each mini-batch step with the steps taken and the steps of the pass, and that step's loss. */
  onProgress?: (step: number, steps: number, loss: number) => void
}

/** Scalar diagnostics of one mini-batch, as the train graph returns them. */
export interface MiniBatchMetrics {
  samples: number
  loss: number
  gradNorm: number
  pgLoss: number
  clipFraction: number
  approxKl: number
  kl?: number
  entropy?: number
  opdLoss?: number
  opdGateMean?: number
  opdPositiveGapShare?: number
  opdGapMean?: number
  /** Share of this mini-batch's samples with a teacher signal. */
  opdSampleShare: number
  /** Distilled tokens: response tokens of this mini-batch's samples with a teacher signal (the OPD mask). */
  opdTokens: number
}

export interface UpdateMetrics {
  miniBatches: number
  /** Step samples trained on, copies included. */
  samples: number
  /** Copies `padToMiniBatch` added (0 without it). */
  paddedSamples: number
  /** Response tokens trained on (every sample's), for training throughput. */
  tokens: number
  /** Null (as every figure of a step) when there were no samples: every episode failed, no step was taken. */
  advantageMean: number | null
  advantageAbsMean: number | null
  /** Means over mini-batches. */
  loss: number | null
  gradNorm: number | null
  pgLoss: number | null
  clipFraction: number | null
  approxKl: number | null
  kl: number | null
  entropy: number | null
  opdLoss: number | null
  /**
   * Over every distilled token of the update (each mini-batch's masked mean weighted by its distilled tokens):
   * the gate σ(β·(t − s)), the share with t − s > 0, and t − s, where s is the live student as its mini-batch
   * saw it. Null when no token was distilled.
   */
  opdGateMean: number | null
  opdPositiveGapShare: number | null
  opdGapMean: number | null
  /** Distilled tokens in the update: response tokens of samples with a teacher signal. */
  opdTokens: number
  /** The first mini-batch's clip fraction and approx KL: 0 when rollout, rescore and train graphs agree. */
  firstClipFraction: number | null
  firstApproxKl: number | null
  seconds: number
}

export interface UpdateResult {
  optimizerState: AdamWState
  metrics: UpdateMetrics
  perMiniBatch: MiniBatchMetrics[]
  /** A_i per trained sample: the input's in order, then `padToMiniBatch`'s copies. */
  advantages: Float64Array
}

const OUT = {
  pgLoss: 'pg_loss',
  clipFraction: 'clip_fraction',
  approxKl: 'approx_kl',
  kl: 'kl',
  entropy: 'entropy_mean',
  opdLoss: 'opd_loss',
  opdGateMean: 'opd_gate_mean',
  opdPositiveGapShare: 'opd_positive_gap_share',
  opdGapMean: 'opd_gap_mean',
} as const

/** A_i of every sample: the group score statistics, optionally weighted so every episode counts the same. */
export function sampleAdvantages(samples: readonly ScoredSample[], settings: UpdateSettings): Float64Array {
  const advantages = groupAdvantages(
    {
      scores: samples.map((s) => stepScore(s.episodeReward, s.valid, settings.invalidPenalty)),
      groups: samples.map((s) => s.group),
      trajectories: samples.map((s) => s.trajectory),
    },
    {
      mode: settings.advantageMode,
      statistics: settings.advantageStatistics === 'steps' ? CODE_STATISTICS : PAPER_STATISTICS,
    },
  )
  if (settings.perEpisodeWeight && samples.length > 0) {
    const lengths = new Map<number, number>()
    for (const s of samples) lengths.set(s.trajectory, s.trajectoryLength)
    const meanLength = [...lengths.values()].reduce((a, b) => a + b, 0) / lengths.size
    samples.forEach((s, i) => {
      advantages[i] = advantages[i]! * (meanLength / s.trajectoryLength)
    })
  }
  return advantages
}

/**
 * The reference's padding (`padToMiniBatch`): the samples followed by copies of uniformly drawn ones (seeded, with
 * replacement) until their number is a multiple of `miniBatchSize`; the samples themselves when it is already.
 */
export function padToMiniBatch(
  samples: readonly ScoredSample[],
  miniBatchSize: number,
  seed: number,
): readonly ScoredSample[] {
  const missing = (miniBatchSize - (samples.length % miniBatchSize)) % miniBatchSize
  if (missing === 0 || samples.length === 0) return samples
  const rng = mulberry32(seed)
  const copies = Array.from({ length: missing }, () => samples[Math.floor(rng.next() * samples.length)] as ScoredSample)
  return [...samples, ...copies]
}

/** The scalar inputs of the actor loss's train graph: a mini-batch's totals (seed/losses.ts TokenMask). */
const TOTALS = { mask: 'mask_total', rows: 'rows_total', distilled: 'distilled_total' } as const

/** Loads the train graph (the optimizer inside) of an actor loss with these terms and coefficients. */
export function loadActorTrainModel(policy: Policy, terms: LossTerms, settings: UpdateSettings): Promise<ModelHandle> {
  return policy.trainer.trainModel(actorLossBuilder(terms, settings))
}

/** The actor loss with these terms and coefficients, and its diagnostics as extra outputs. */
export function actorLossBuilder(terms: LossTerms, settings: UpdateSettings): LossBuilder {
  return (op, scores, dtype) => {
    const tokens = (name: string) => op.input(name, dtype, ['B', 'T'])
    const scalar = (name: string) => op.input(name, dtype, [])
    const x: ActorLossInputs = {
      logProbs: scores.logp,
      oldLogProbs: tokens('old_logp'),
      advantages: tokens('adv'),
      mask: tokens('mask'),
      // the mini-batch's totals, fed: its micro-batches' losses then add up to its loss (docs/algorithm.md §6.5)
      maskTotal: scalar(TOTALS.mask),
      rowsTotal: scalar(TOTALS.rows),
    }
    if (terms.kl) x.refLogProbs = tokens('ref_logp')
    if (terms.entropy) x.entropy = scores.entropy
    if (terms.opd) {
      x.teacherLogProbs = tokens('teacher_logp')
      if (settings.opdGate === 'control') x.controlLogProbs = tokens('control_logp')
      x.opdSampleMask = op.input('opd_mask', dtype, ['B'])
      x.distilledTotal = scalar(TOTALS.distilled)
    }
    const r = actorLoss(op, x, {
      terms,
      klCoef: settings.klCoef,
      entropyCoef: settings.entropyCoef,
      opdCoef: settings.opdCoef,
      opdBeta: settings.opdBeta,
      opdGateBaseline: settings.opdGateBaseline,
      opdGate: settings.opdGate,
      aggregation: settings.aggregation,
      ppo: { clipLow: settings.clipLow, clipHigh: settings.clipHigh, clipRatioC: settings.clipRatioC },
      clampLogRatios: settings.clampLogRatios,
    })
    const extra: Record<string, Value> = {
      [OUT.pgLoss]: r.pg.loss,
      [OUT.clipFraction]: r.pg.clipFraction,
      [OUT.approxKl]: r.pg.approxKl,
    }
    if (r.kl) extra[OUT.kl] = r.kl
    if (r.entropy) extra[OUT.entropy] = r.entropy
    if (r.opd) {
      extra[OUT.opdLoss] = r.opd.loss
      extra[OUT.opdGateMean] = r.opd.gateMean
      extra[OUT.opdPositiveGapShare] = r.opd.positiveGapShare
      extra[OUT.opdGapMean] = r.opd.gapMean
    }
    return { loss: r.loss, extra }
  }
}

/** The train graph's feeds for one mini-batch (`control_logp` with the `control` gate). */
export function actorFeeds(
  policy: Policy,
  batch: readonly ScoredSample[],
  advantages: ArrayLike<number>,
  terms: LossTerms,
  temperature: number,
  gate: OpdGate = 'student',
): Feeds {
  const model = policy.model
  const tb = model.tokenBatch(
    batch.map((s) => ({ context: s.promptIds, response: s.responseIds })),
    temperature,
  )
  const { B, T } = tb
  const old = new Float64Array(B * T)
  const ref = new Float64Array(B * T)
  const teacher = new Float64Array(B * T)
  const control = terms.opd && gate === 'control' ? new Float64Array(B * T) : null
  const adv = new Float64Array(B * T)
  const opdMask = new Float64Array(B)
  batch.forEach((s, b) => {
    const offset = tb.offsets[b]!
    if (s.old.length !== s.responseIds.length || s.ref.length !== s.responseIds.length) {
      throw new CorePhaseError(
        `update: sample (trajectory ${s.trajectory}, step ${s.step}) has ${s.responseIds.length} response tokens ` +
          `but ${s.old.length} old and ${s.ref.length} reference log-probs`,
      )
    }
    if (terms.opd && gate === 'control' && s.teacher && !s.control) {
      throw new CorePhaseError(
        `update: sample (trajectory ${s.trajectory}, step ${s.step}) has teacher log-probs but no control ones, ` +
          'and stage2.opdGate is control: rerun the rescore phase with this configuration',
      )
    }
    if (s.teacher) opdMask[b] = 1
    for (let k = 0; k < s.responseIds.length; k++) {
      const at = b * T + offset + k
      old[at] = s.old[k]!
      ref[at] = s.ref[k]!
      teacher[at] = s.teacher ? s.teacher[k]! : s.old[k]!
      if (control) control[at] = s.teacher && s.control ? s.control[k]! : s.old[k]!
      adv[at] = advantages[b]!
    }
  })
  const feeds: Feeds = {
    ...tb.feeds,
    old_logp: model.float([B, T], old),
    adv: model.float([B, T], adv),
    mask: model.float([B, T], tb.responseMask),
  }
  const maskTotal = tb.responseMask.reduce((a, m) => a + m, 0)
  feeds[TOTALS.mask] = model.float([], [maskTotal])
  feeds[TOTALS.rows] = model.float([], [B])
  if (terms.kl) feeds.ref_logp = model.float([B, T], ref)
  if (terms.opd) {
    feeds.teacher_logp = model.float([B, T], teacher)
    if (control) feeds.control_logp = model.float([B, T], control)
    feeds.opd_mask = model.float([B], opdMask)
    const distilled = batch.reduce((n, s) => n + (s.teacher ? s.responseIds.length : 0), 0)
    feeds[TOTALS.distilled] = model.float([], [distilled])
  }
  return feeds
}

/** The loss terms an operator reads in a non-finite failure, in the order they are checked, by graph output. */
const LOSS_TERMS = [
  ['pg', OUT.pgLoss],
  ['kl', OUT.kl],
  ['entropy', OUT.entropy],
  ['opd', OUT.opdLoss],
  ['total', 'loss'],
  ['gradient', 'gradNorm'],
] as const

/**
 * A mini-batch step, its non-finite failure rethrown naming the first non-finite loss term (pg, kl, entropy,
 * opd; total when only the sum diverged; gradient when the loss is finite but its gradient is not).
 */
async function namedNonFinite(
  step: Promise<TrainStepResult>,
  miniBatch: number,
  miniBatches: number,
  lr: number,
): Promise<TrainStepResult> {
  try {
    return await step
  } catch (error) {
    if (!(error instanceof NonFiniteLossError)) throw error
    const v = error.values
    const [term, output] = LOSS_TERMS.find(([, name]) => name in v && !Number.isFinite(v[name])) ?? ['total', 'loss']
    const what = term === 'gradient' ? 'the gradient norm' : `the ${term} loss term`
    throw new NonFiniteLossError(
      `${what} is ${v[output]} in mini-batch ${miniBatch} of ${miniBatches} (total loss ${v.loss}, ` +
        `lr ${lr}); weights left unchanged: retry with a smaller stage2.lr`,
      v,
    )
  }
}

/** The update of an iteration without step samples: no step taken. */
async function emptyUpdate(policy: Policy, input: UpdateInput, started: number): Promise<UpdateResult> {
  const { trainer } = policy
  if (input.optimizerState) await trainer.loadOptimizerState(input.optimizerState)
  return {
    optimizerState: await trainer.optimizerState(),
    perMiniBatch: [],
    advantages: new Float64Array(0),
    metrics: {
      miniBatches: 0,
      samples: 0,
      paddedSamples: 0,
      tokens: 0,
      advantageMean: null,
      advantageAbsMean: null,
      loss: null,
      gradNorm: null,
      pgLoss: null,
      clipFraction: null,
      approxKl: null,
      kl: null,
      entropy: null,
      opdLoss: null,
      opdGateMean: null,
      opdPositiveGapShare: null,
      opdGapMean: null,
      opdTokens: 0,
      firstClipFraction: null,
      firstApproxKl: null,
      seconds: (performance.now() - started) / 1000,
    },
  }
}

/** One pass over the samples in mini-batches; trains `policy`'s weights in place. */
export async function update(policy: Policy, input: UpdateInput): Promise<UpdateResult> {
  const started = performance.now()
  const { terms, settings } = input
  // every episode of the iteration failed in its environment (a remote server's failures): nothing to learn from,
  // so no step: the weights and the optimizer's state stay as they were, and the figures of a step are null
  if (input.samples.length === 0) return emptyUpdate(policy, input, started)
  if (settings.padToMiniBatch && input.seed === undefined)
    throw new CorePhaseError('update: padToMiniBatch needs a seed for the samples it copies')
  const samples = settings.padToMiniBatch
    ? padToMiniBatch(input.samples, settings.miniBatchSize, input.seed as number)
    : input.samples
  const advantages = sampleAdvantages(samples, settings)
  const train = await loadActorTrainModel(policy, terms, settings)
  const { trainer } = policy
  // without a state, the trainer's own: fresh for a policy just loaded without one, or the stored one it holds
  if (input.optimizerState) await trainer.loadOptimizerState(input.optimizerState)
  const perMiniBatch: MiniBatchMetrics[] = []
  const miniBatches = Math.ceil(samples.length / settings.miniBatchSize)
  for (let from = 0; from < samples.length; from += settings.miniBatchSize) {
    const batch = samples.slice(from, from + settings.miniBatchSize)
    const feeds = actorFeeds(
      policy,
      batch,
      advantages.subarray(from, from + batch.length),
      terms,
      settings.temperature,
      settings.opdGate,
    )
    const step = await namedNonFinite(
      trainer.step(train, feeds, {
        lr: settings.lr,
        maxGradNorm: settings.maxGradNorm,
        weightDecay: settings.weightDecay,
        // micro-batches (engine.microBatchSize): each one's loss is its part of the mini-batch's (the totals above)
        shares: 'parts',
      }),
      perMiniBatch.length + 1,
      miniBatches,
      settings.lr,
    )
    const o = step.outputs
    const m: MiniBatchMetrics = {
      samples: batch.length,
      loss: step.loss,
      gradNorm: step.gradNorm,
      pgLoss: o[OUT.pgLoss]!,
      clipFraction: o[OUT.clipFraction]!,
      approxKl: o[OUT.approxKl]!,
      opdSampleShare: batch.filter((s) => s.teacher).length / batch.length,
      opdTokens: batch.reduce((n, s) => n + (s.teacher ? s.responseIds.length : 0), 0),
    }
    if (terms.kl) m.kl = o[OUT.kl]!
    if (terms.entropy) m.entropy = o[OUT.entropy]!
    if (terms.opd) {
      m.opdLoss = o[OUT.opdLoss]!
      m.opdGateMean = o[OUT.opdGateMean]!
      m.opdPositiveGapShare = o[OUT.opdPositiveGapShare]!
      m.opdGapMean = o[OUT.opdGapMean]!
    }
    perMiniBatch.push(m)
    input.onProgress?.(perMiniBatch.length, miniBatches, m.loss)
  }
  const mean = (pick: (m: MiniBatchMetrics) => number | undefined): number | null => {
    const values = perMiniBatch.map(pick).filter((v): v is number => v !== undefined)
    return values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length
  }
  // The OPD loss averages over mini-batches that had any teacher signal (an empty mask reports 0).
  const opdMean = (pick: (m: MiniBatchMetrics) => number | undefined) =>
    mean((m) => (m.opdSampleShare > 0 ? pick(m) : undefined))
  // Gate diagnostics are token means: a mini-batch's masked mean counts as many times as it has distilled tokens.
  const opdTokens = perMiniBatch.reduce((n, m) => n + m.opdTokens, 0)
  const perOpdToken = (pick: (m: MiniBatchMetrics) => number | undefined): number | null => {
    if (!terms.opd || opdTokens === 0) return null
    return perMiniBatch.reduce((sum, m) => sum + (m.opdTokens > 0 ? pick(m)! * m.opdTokens : 0), 0) / opdTokens
  }
  const first = perMiniBatch[0]!
  return {
    optimizerState: await trainer.optimizerState(),
    perMiniBatch,
    advantages,
    metrics: {
      miniBatches: perMiniBatch.length,
      samples: samples.length,
      paddedSamples: samples.length - input.samples.length,
      tokens: samples.reduce((n, s) => n + s.responseIds.length, 0),
      advantageMean: advantages.reduce((a, b) => a + b, 0) / advantages.length,
      advantageAbsMean: advantages.reduce((a, b) => a + Math.abs(b), 0) / advantages.length,
      loss: mean((m) => m.loss)!,
      gradNorm: mean((m) => m.gradNorm)!,
      pgLoss: mean((m) => m.pgLoss)!,
      clipFraction: mean((m) => m.clipFraction)!,
      approxKl: mean((m) => m.approxKl)!,
      kl: mean((m) => m.kl),
      entropy: mean((m) => m.entropy),
      opdLoss: opdMean((m) => m.opdLoss),
      opdGateMean: perOpdToken((m) => m.opdGateMean),
      opdPositiveGapShare: perOpdToken((m) => m.opdPositiveGapShare),
      opdGapMean: perOpdToken((m) => m.opdGapMean),
      opdTokens,
      firstClipFraction: first.clipFraction,
      firstApproxKl: first.approxKl,
      seconds: (performance.now() - started) / 1000,
    },
  }
}
