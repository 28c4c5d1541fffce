import type { LossBuilder } from './model.ts'

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
