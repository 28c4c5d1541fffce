import { type AdamW, clipScale, type Feeds, globalNorm, type ModelHandle } from '../engine/index.ts'
import { IO, type LossBuilder } from './model.ts'
import type { PolicyModel } from './policy-model.ts'

/**
 * Mean next-token negative log-likelihood over the targets a (B, T) `mask` input marks: the benchmarks' loss,
 * the one a PyTorch cross-entropy reference computes.
 */
export const meanNll: LossBuilder = (op, scores, dtype) => {
  const mask = op.input('mask', dtype, ['B', 'T'])
  return {
    loss: op.Neg(
      op.Div(
        op.ReduceSum(op.Mul(scores.logp, mask), undefined, { keepdims: 0 }),
        op.ReduceSum(mask, undefined, { keepdims: 0 }),
      ),
    ),
  }
}

export interface TrainStepResult {
  loss: number
  /** Global gradient norm before clipping. */
  gradNorm: number
  /** Every scalar output of the train graph besides the loss (diagnostics of the loss builder). */
  outputs: Record<string, number>
}

/** A step whose loss or gradient is not finite; the weights are left unchanged. */
export class NonFiniteLossError extends Error {
  override name = 'NonFiniteLossError'
  constructor(
    message: string,
    /** The step's scalar outputs (the loss under `loss`), to name the term that diverged. */
    readonly values: Record<string, number> = {},
  ) {
    super(message)
  }
}

/**
 * One optimizer step: runs the train graph (loss, log-probs and every gradient in one run), clips the global
 * gradient norm (the factor applied inside AdamW's pass), and updates the model's weights (with LoRA: its adapters) in place with AdamW.
 */
export async function trainStep(
  model: PolicyModel,
  train: ModelHandle,
  feeds: Feeds,
  optimizer: AdamW,
  lr: number,
  maxGradNorm = 1,
): Promise<TrainStepResult> {
  const out = await model.engine.run(train, feeds)
  const loss = Number(out[IO.loss]?.data[0])
  const outputs: Record<string, number> = {}
  for (const [name, t] of Object.entries(out))
    if (t.dims.length === 0 && name !== IO.loss) outputs[name] = Number(t.data[0])
  if (!Number.isFinite(loss))
    throw new NonFiniteLossError(`train step: loss is ${loss}; weights left unchanged`, { ...outputs, loss })
  const grads: Record<string, Float32Array> = {}
  for (const spec of model.trainableSpecs()) grads[spec.name] = out[`${spec.name}_grad`]?.data as Float32Array
  const norm = globalNorm(grads)
  const scale = clipScale(norm, maxGradNorm)
  // a NaN gradient under a finite loss would turn every weight into NaN at this step
  if (!Number.isFinite(norm))
    throw new NonFiniteLossError(`train step: gradient norm is ${norm} (loss ${loss}); weights left unchanged`, {
      ...outputs,
      loss,
      gradNorm: norm,
    })
  optimizer.step(Object.fromEntries(model.trainable()), grads, lr, scale)
  return { loss, gradNorm: norm, outputs }
}
