import type { Feeds } from '../engine/index.ts'
import type { LossBuilder } from './model.ts'
import type { PolicyModel, ScoreItem } from './policy-model.ts'

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

/** The feeds of a `meanNll` train graph for `items`: their token batch, every response token scored. */
export function meanNllFeeds(
  model: Pick<PolicyModel, 'tokenBatch' | 'float'>,
  items: readonly ScoreItem[],
  temperature = 1,
): Feeds {
  const batch = model.tokenBatch(items, temperature)
  return { ...batch.feeds, mask: model.float([batch.B, batch.T], batch.responseMask) }
}
