import { type AdamW, clipGradNorm, type Feeds, type ModelHandle } from '../engine/index.ts'
import { IO } from './model.ts'
import { parameterSpecs } from './parameters.ts'
import type { PolicyModel } from './policy-model.ts'

export interface TrainStepResult {
  loss: number
  /** Global gradient norm before clipping. */
  gradNorm: number
  /** Every scalar output of the train graph besides the loss (diagnostics of the loss builder). */
  outputs: Record<string, number>
}

export class NonFiniteLossError extends Error {
  override name = 'NonFiniteLossError'
}

/**
 * One optimizer step: runs the train graph (loss, log-probs and every gradient in one run), clips the global
 * gradient norm, and updates the model's weights in place with AdamW.
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
  if (!Number.isFinite(loss)) throw new NonFiniteLossError(`train step: loss is ${loss}; weights left unchanged`)
  const grads: Record<string, Float32Array> = {}
  for (const spec of parameterSpecs(model.config)) grads[spec.name] = out[`${spec.name}_grad`]?.data as Float32Array
  const { norm } = clipGradNorm(grads, maxGradNorm)
  optimizer.step(Object.fromEntries(model.weights), grads, lr)
  const outputs: Record<string, number> = {}
  for (const [name, t] of Object.entries(out))
    if (t.dims.length === 0 && name !== IO.loss) outputs[name] = Number(t.data[0])
  return { loss, gradNorm: norm, outputs }
}
