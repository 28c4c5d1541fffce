// Supervised training on (context → response) token pairs, loss on response tokens only (seed/ sftLoss), AdamW
// with warm-up and cosine decay. Shared by the warm-start (behaviour cloning) and Stage 1 (skill SFT mixed
// with acting data).
import { type AdamWState, cosineWithWarmup, type ModelHandle } from '../engine/index.ts'
import { mulberry32 } from '../envs/rng.ts'
import { sftLoss } from '../seed/index.ts'
import { CorePhaseError, type Policy } from './policy.ts'

export interface SupervisedExample {
  context: number[]
  response: number[]
  /** The loss weight of each response token (default 1 each); the loss is the weighted mean. */
  weights?: number[]
}

/** A pool of examples and its share of the steps (shares are normalized). */
export interface ExamplePool {
  name: string
  examples: readonly SupervisedExample[]
  share: number
  /** Examples per step drawn from this pool; default the settings' batch size. */
  batchSize?: number
}

export interface SupervisedSettings {
  steps: number
  batchSize: number
  lr: number
  warmupSteps: number
  weightDecay?: number
  maxGradNorm?: number
  seed: number
  /** Called every `checkEvery` steps (and after the last); training stops when it returns true. */
  checkEvery?: number
  check?: (step: number) => Promise<boolean>
  /** Told after each step (1-based) with its loss: progress for heartbeats. */
  onStep?: (step: number, loss: number) => void
}

/** One pool's share of a training: its steps and the mean loss over the first and the last 10% of them. */
export interface PoolLoss {
  name: string
  steps: number
  firstLoss: number
  lastLoss: number
}

export interface SupervisedResult {
  steps: number
  /** Mean loss over the first and the last 10% of steps. */
  firstLoss: number
  lastLoss: number
  /**
   * The same per pool, over the steps that drew it: pools differ in length and in how well they are learned, so
   * the overall first and last losses mostly say which pool the first and last steps drew.
   */
  pools: PoolLoss[]
  losses: number[]
  stoppedEarly: boolean
  optimizerState: AdamWState
  seconds: number
}

export function loadSftTrainModel(policy: Policy): Promise<ModelHandle> {
  return policy.trainer.trainModel((op, scores, dtype) => {
    const mask = op.input('mask', dtype, ['B', 'T'])
    return { loss: sftLoss(op, { logProbs: scores.logp, mask }).loss }
  })
}

/** Trains `policy` (a fresh optimizer state); each step's batch comes from one pool, drawn by share, seeded, with replacement. */
export async function supervisedTrain(
  policy: Policy,
  pools: readonly ExamplePool[],
  settings: SupervisedSettings,
): Promise<SupervisedResult> {
  const started = performance.now()
  const live = pools.filter((p) => p.share > 0 && p.examples.length > 0)
  if (live.length === 0) {
    throw new CorePhaseError(
      `supervised training: no examples (${pools.map((p) => `${p.name}: ${p.examples.length}`).join(', ')})`,
    )
  }
  const total = live.reduce((a, p) => a + p.share, 0)
  const rng = mulberry32(settings.seed)
  const train = await loadSftTrainModel(policy)
  const { trainer } = policy
  await trainer.loadOptimizerState()
  const schedule = cosineWithWarmup({
    peakLr: settings.lr,
    warmupSteps: Math.min(settings.warmupSteps, settings.steps),
    totalSteps: settings.steps,
    minLr: settings.lr * 0.1,
  })
  const losses: number[] = []
  const drawn: number[] = []
  let stoppedEarly = false
  for (let step = 0; step < settings.steps; step++) {
    // one pool per step: pools differ in length (skill demos, analyzer prompts), and a mixed batch is padded
    // to its longest example
    const pool = pickPool(live, rng.next() * total)
    const batch: SupervisedExample[] = []
    for (let i = 0; i < (pool.batchSize ?? settings.batchSize); i++)
      batch.push(pool.examples[Math.floor(rng.next() * pool.examples.length)]!)
    const tb = policy.model.tokenBatch(batch, 1)
    const feeds = { ...tb.feeds, mask: policy.model.float([tb.B, tb.T], weightedMask(batch, tb.T, tb.responseMask)) }
    const r = await trainer.step(train, feeds, {
      lr: schedule(step),
      maxGradNorm: settings.maxGradNorm ?? 1,
      weightDecay: settings.weightDecay ?? 0.01,
    })
    losses.push(r.loss)
    drawn.push(live.indexOf(pool))
    settings.onStep?.(step + 1, r.loss)
    const every = settings.checkEvery ?? 0
    if (settings.check && every > 0 && (step + 1) % every === 0 && (await settings.check(step + 1))) {
      stoppedEarly = step + 1 < settings.steps
      break
    }
  }
  return {
    ...firstAndLast(losses),
    pools: live.map((p, i) => ({ name: p.name, ...firstAndLast(losses.filter((_, s) => drawn[s] === i)) })),
    losses,
    stoppedEarly,
    optimizerState: await trainer.optimizerState(),
    seconds: (performance.now() - started) / 1000,
  }
}

/** Steps and the mean loss over the first and the last 10% of them (NaN for no steps). */
function firstAndLast(losses: readonly number[]): Omit<PoolLoss, 'name'> {
  const tenth = Math.max(1, Math.floor(losses.length / 10))
  const avg = (xs: readonly number[]) => (xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length)
  return { steps: losses.length, firstLoss: avg(losses.slice(0, tenth)), lastLoss: avg(losses.slice(-tenth)) }
}

/**
 * Per-pool losses as flat stats (`analyzerSteps`, `analyzerFirstLoss`, `analyzerLastLoss`, …); a pool no step drew
 * has only its steps (0).
 */
export function poolLossStats(pools: readonly PoolLoss[]): Record<string, number> {
  const stats: Record<string, number> = {}
  for (const p of pools) {
    stats[`${p.name}Steps`] = p.steps
    if (p.steps === 0) continue
    stats[`${p.name}FirstLoss`] = p.firstLoss
    stats[`${p.name}LastLoss`] = p.lastLoss
  }
  return stats
}

/** The response mask with each example's token weights in place of its ones. */
function weightedMask(batch: readonly SupervisedExample[], T: number, mask: Float64Array): Float64Array {
  if (batch.every((e) => e.weights === undefined)) return mask
  const out = Float64Array.from(mask)
  batch.forEach((e, b) => {
    if (e.weights === undefined) return
    if (e.weights.length !== e.response.length)
      throw new CorePhaseError(`supervised example ${b}: ${e.weights.length} weights for ${e.response.length} tokens`)
    // the target of position t is token t + 1, so response token i is scored at context.length - 1 + i
    e.weights.forEach((w, i) => {
      out[b * T + e.context.length - 1 + i] = w
    })
  })
  return out
}

/** The pool whose share interval holds `u` ∈ [0, Σ shares). */
function pickPool(pools: readonly ExamplePool[], u: number): ExamplePool {
  let rest = u
  for (const pool of pools) {
    rest -= pool.share
    if (rest < 0) return pool
  }
  return pools[pools.length - 1]!
}
