// Group advantages (docs/algorithm.md §6.1). One training sample is one environment step; a GRPO group is every
// step sample sharing a task (uid). The released code pools all step samples of a group for the statistics
// and uses the unbiased std; the paper's formula is over the N trajectories with the population std. Both are
// here, the code's as the default.
import { SeedInputError } from './errors.ts'

/** Penalty on a step whose action did not parse (`apply_invalid_action_penalty`). */
export const INVALID_ACTION_PENALTY = 0.1
/** Added to σ in the mean/std mode. */
export const ADVANTAGE_EPSILON = 1e-6

export interface StepSamples {
  /** S_i per step sample: the episode reward, minus the penalty if that step's action was invalid. */
  scores: ArrayLike<number>
  /** Group (task uid) of each sample. */
  groups: readonly (string | number)[]
  /** Trajectory of each sample; used by the trajectory-level statistics. */
  trajectories: readonly (string | number)[]
}

export interface AdvantageStatistics {
  /**
   * `steps` (code): every step sample enters its group's mean and std, so longer trajectories weigh more.
   * `trajectories`: one value per trajectory, its first step sample's score (what the code's switch
   * `compute_mean_std_cross_steps=False` takes).
   */
  pool: 'steps' | 'trajectories'
  /** `unbiased` (n − 1, torch.std, the code) or `population` (n, the paper). */
  std: 'unbiased' | 'population'
}

export const CODE_STATISTICS: AdvantageStatistics = { pool: 'steps', std: 'unbiased' }
export const PAPER_STATISTICS: AdvantageStatistics = { pool: 'trajectories', std: 'population' }

interface GroupStats {
  mean: number
  std: number
}

type AdvantageFn = (score: number, stats: GroupStats, epsilon: number) => number

/** The advantage modes, closed: `mean` is mean_norm, `meanStd` is mean_std_norm. */
export const ADVANTAGE = {
  mean: (score, stats) => score - stats.mean,
  meanStd: (score, stats, epsilon) => (score - stats.mean) / (stats.std + epsilon),
} as const satisfies Record<string, AdvantageFn>

export type AdvantageMode = keyof typeof ADVANTAGE

export interface AdvantageOptions {
  mode: AdvantageMode
  statistics?: AdvantageStatistics
  epsilon?: number
}

/** S_i of one step sample. */
export function stepScore(episodeReward: number, valid: boolean, penalty = INVALID_ACTION_PENALTY): number {
  return valid ? episodeReward : episodeReward - penalty
}

/**
 * A_i for every step sample. A group whose statistics pool has one entry gets μ = 0 and σ = 1, as the code
 * does (so a lone sample keeps its score instead of getting 0).
 */
export function groupAdvantages(samples: StepSamples, options: AdvantageOptions): Float64Array {
  const { scores, groups, trajectories } = samples
  const n = scores.length
  if (groups.length !== n || trajectories.length !== n) {
    throw new SeedInputError(
      `advantages: ${n} scores, ${groups.length} group ids and ${trajectories.length} trajectory ids must match`,
    )
  }
  for (let i = 0; i < n; i++) {
    if (!Number.isFinite(scores[i]!)) throw new SeedInputError(`advantages: score ${i} is ${scores[i]}`)
  }
  const statistics = options.statistics ?? CODE_STATISTICS
  const epsilon = options.epsilon ?? ADVANTAGE_EPSILON
  const fn: AdvantageFn = ADVANTAGE[options.mode]
  if (!fn) throw new SeedInputError(`advantages: unknown mode ${JSON.stringify(options.mode)}`)

  const pools = new Map<string | number, number[]>()
  const seen = new Set<string>()
  for (let i = 0; i < n; i++) {
    if (statistics.pool === 'trajectories') {
      const key = JSON.stringify([groups[i], trajectories[i]])
      if (seen.has(key)) continue
      seen.add(key)
    }
    const pool = pools.get(groups[i]!)
    if (pool) pool.push(scores[i]!)
    else pools.set(groups[i]!, [scores[i]!])
  }
  const stats = new Map<string | number, GroupStats>()
  for (const [group, pool] of pools) stats.set(group, poolStats(pool, statistics.std))

  const out = new Float64Array(n)
  for (let i = 0; i < n; i++) out[i] = fn(scores[i]!, stats.get(groups[i]!)!, epsilon)
  return out
}

function poolStats(pool: readonly number[], std: AdvantageStatistics['std']): GroupStats {
  if (pool.length === 1) return { mean: 0, std: 1 }
  const mean = pool.reduce((a, b) => a + b, 0) / pool.length
  const squares = pool.reduce((a, b) => a + (b - mean) ** 2, 0)
  return { mean, std: Math.sqrt(squares / (std === 'unbiased' ? pool.length - 1 : pool.length)) }
}

/** A_i broadcast to its response tokens: (B, T) row-major, A_i where the mask is set, 0 elsewhere. */
export function tokenAdvantages(advantages: ArrayLike<number>, mask: ArrayLike<number>, T: number): Float32Array {
  const B = advantages.length
  if (mask.length !== B * T) throw new SeedInputError(`tokenAdvantages: mask has ${mask.length} entries, not ${B}×${T}`)
  const out = new Float32Array(B * T)
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      const m = mask[b * T + t]!
      out[b * T + t] = m === 0 ? 0 : advantages[b]! * m // no −0 on padding
    }
  }
  return out
}
