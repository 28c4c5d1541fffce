// AdamW, global-norm clipping and a finiteness guard as nodes of a train graph. The graph's outputs are the new
// parameters and moments, never the gradients, so that a trainer keeps its state where the engine runs (the
// run writes them into the kept tensors' memory, RunOptions.inPlace). The JS AdamW of optimizer.ts is the
// reference this equals (test/policy/trainer.test.ts).
import type { Builder } from './builder.ts'
import { isFloat } from './dtype.ts'
import { GraphError } from './errors.ts'
import type { Value } from './ir.ts'
import { OptimizerError } from './optimizer.ts'

/** Names of the optimizer's inputs and outputs in a train graph. */
export const ADAMW_IO = {
  /** First moment of a parameter (AdamWState's name for it). */
  firstMoment: (param: string) => `${param}.exp_avg`,
  /** Second moment of a parameter. */
  secondMoment: (param: string) => `${param}.exp_avg_sq`,
  /** The value after the step of an input (a parameter or a moment). */
  next: (name: string) => `${name}.next`,
  /** lr / (1 − β1ᵗ): Adam's step size with the first moment's bias correction. */
  stepSize: 'adamw.step_size',
  /** 1 / √(1 − β2ᵗ): the second moment's bias correction, on its root. */
  rootCorrection: 'adamw.root_correction',
  /** 1 − lr·λ: decoupled weight decay, applied to the parameters that decay. */
  decay: 'adamw.decay',
  maxGradNorm: 'adamw.max_grad_norm',
  /** Global gradient norm before clipping (float64). */
  gradNorm: 'grad_norm',
  /** Whether the loss and the gradient norm were finite, i.e. whether the step changed anything. */
  finite: 'finite',
  /** A parameter's gradient as the step uses it, before clipping (`outputGradients`). */
  gradient: (param: string) => `${param}.gradient`,
  /** A parameter's gradient summed over the micro-batches of a step so far (gradient accumulation). */
  gradientSum: (param: string) => `${param}.grad_sum`,
  /** The weight of a micro-batch's loss in the step's: its share of the batch (gradient accumulation). */
  lossScale: 'loss_scale',
} as const

export interface AdamWGraphConfig {
  beta1?: number
  beta2?: number
  eps?: number
  /** Parameters excluded from weight decay (norm scales), by name. */
  noDecay?: (name: string) => boolean
  /** Output the gradients too (ADAMW_IO.gradient): a test holds the update to the JS AdamW on the same gradients. */
  outputGradients?: boolean
}

/**
 * Appends the optimizer to a graph that holds `loss` and the gradient `grads[i]` of each parameter
 * `params[i]` (graph inputs): the global gradient norm (`grad_norm`), the clipping factor min(1, max / (‖g‖ +
 * 1e-6)) applied to every gradient, AdamW with bias correction and decoupled weight decay, and the guard: where
 * the loss or the norm is not finite (`finite` false), every `.next` output is its input unchanged. Declares
 * the moments and the step's scalars (ADAMW_IO) as inputs and every new value as an output.
 */
export function appendAdamW(
  op: Builder,
  loss: Value,
  params: readonly Value[],
  grads: readonly Value[],
  config: AdamWGraphConfig = {},
): void {
  const beta1 = config.beta1 ?? 0.9
  const beta2 = config.beta2 ?? 0.999
  const eps = config.eps ?? 1e-8
  for (const [k, v] of [
    ['beta1', beta1],
    ['beta2', beta2],
  ] as const)
    if (!(v >= 0 && v < 1)) throw new OptimizerError(`AdamW: ${k} must be in [0, 1), got ${v}`)
  if (params.length !== grads.length || params.length === 0)
    throw new GraphError(`appendAdamW: ${params.length} parameters and ${grads.length} gradients`)
  const dtype = loss.dtype
  for (const p of params)
    if (!isFloat(p.dtype) || p.dtype !== dtype)
      throw new GraphError(`appendAdamW: parameter ${p.name} is ${p.dtype}, the loss ${dtype}`)
  const scalar = (name: string) => op.input(name, dtype, [])
  const stepSize = scalar(ADAMW_IO.stepSize)
  const rootCorrection = scalar(ADAMW_IO.rootCorrection)
  const decay = scalar(ADAMW_IO.decay)
  const maxNorm = scalar(ADAMW_IO.maxGradNorm)

  // Σ g² in float64 from float32 partial sums along each gradient's last axis (a float32 sum over millions of
  // values drifts by ~1e-5 relative; rows of a few thousand by ~1e-7), without a float64 copy of any gradient
  const squares = grads.map((g) => {
    if (g.shape.length < 2) return op.ReduceSumSquare(op.Cast(g, 'float64'), undefined, { keepdims: 0 })
    return op.ReduceSum(op.Cast(op.ReduceSumSquare(g, [-1], { keepdims: 0 }), 'float64'), undefined, { keepdims: 0 })
  })
  const norm64 = op.Sqrt(squares.reduce((a, b) => op.Add(a, b)))
  op.output(norm64, ADAMW_IO.gradNorm)
  const norm = dtype === 'float64' ? norm64 : op.Cast(norm64, dtype)
  const infinity = op.scalar(Number.POSITIVE_INFINITY, dtype)
  const finite = op.And(
    op.Less(op.Abs(loss), infinity),
    op.Less(op.Abs(norm64), op.scalar(Number.POSITIVE_INFINITY, 'float64')),
  )
  op.output(finite, ADAMW_IO.finite)
  const clip = op.Where(op.LessOrEqual(norm, maxNorm), op.scalar(1, dtype), op.Div(maxNorm, op.Add(norm, 1e-6)))
  if (config.outputGradients)
    grads.forEach((g, i) => {
      op.output(op.Identity(g), ADAMW_IO.gradient((params[i] as Value).name))
    })

  // Clipping and the guard are folded into the step's scalars, so that each tensor takes as few elementwise passes
  // as AdamW allows (14): on a non-finite step the gradient is zeroed (its one Where) and the scalars become
  // those of no step (β 1, gradient weights 0, decay 1, step size 0), which leave m, v and p exactly as they were.
  const when = (value: Value | number, otherwise: number) =>
    op.Where(finite, typeof value === 'number' ? op.scalar(value, dtype) : value, op.scalar(otherwise, dtype))
  const keepFirst = when(beta1, 1)
  const keepSecond = when(beta2, 1)
  const firstWeight = when(op.Mul(clip, 1 - beta1), 0)
  const secondWeight = when(op.Mul(op.Mul(clip, clip), 1 - beta2), 0)
  const decayed = when(decay, 1)
  // lr/(1−β1ᵗ) · m / (√v/√(1−β2ᵗ) + ε) = (lr/(1−β1ᵗ)·√(1−β2ᵗ)) · m / (√v + ε·√(1−β2ᵗ))
  const stepScale = when(op.Div(stepSize, rootCorrection), 0)
  const epsScaled = op.Div(op.scalar(eps, dtype), rootCorrection)
  const zero = op.scalar(0, dtype)

  params.forEach((p, i) => {
    const g = op.Where(finite, grads[i] as Value, zero)
    const m = op.input(ADAMW_IO.firstMoment(p.name), dtype, p.shape)
    const v = op.input(ADAMW_IO.secondMoment(p.name), dtype, p.shape)
    const m1 = op.Add(op.Mul(m, keepFirst), op.Mul(g, firstWeight))
    const v1 = op.Add(op.Mul(v, keepSecond), op.Mul(op.Mul(g, g), secondWeight))
    const kept = config.noDecay?.(p.name) ? p : op.Mul(p, decayed)
    const p1 = op.Sub(kept, op.Div(op.Mul(m1, stepScale), op.Add(op.Sqrt(v1), epsScaled)))
    op.output(p1, ADAMW_IO.next(p.name))
    op.output(m1, ADAMW_IO.next(m.name))
    op.output(v1, ADAMW_IO.next(v.name))
  })
}

/** The step's scalar inputs for step `step` (1-based, the step being taken) at learning rate `lr`. */
export function adamwScalars(
  step: number,
  lr: number,
  settings: { beta1?: number; beta2?: number; weightDecay?: number; maxGradNorm: number },
): Record<string, number> {
  if (!Number.isFinite(lr) || lr < 0) throw new OptimizerError(`AdamW: learning rate must be finite and ≥ 0, got ${lr}`)
  if (!(settings.maxGradNorm > 0))
    throw new OptimizerError(`clipGradNorm: maxNorm must be > 0, got ${settings.maxGradNorm}`)
  const beta1 = settings.beta1 ?? 0.9
  const beta2 = settings.beta2 ?? 0.999
  return {
    [ADAMW_IO.stepSize]: lr / (1 - beta1 ** step),
    [ADAMW_IO.rootCorrection]: 1 / Math.sqrt(1 - beta2 ** step),
    [ADAMW_IO.decay]: 1 - lr * (settings.weightDecay ?? 0.01),
    [ADAMW_IO.maxGradNorm]: settings.maxGradNorm,
  }
}
