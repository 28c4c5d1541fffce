// The metrics of one Stage 2 iteration (metrics.json), aggregated from the statistics its phase shards recorded
// in their manifests: counts add up over shards, rates are weighted by what they are rates of (success by
// episodes, parse rate by analyzed trajectories), so the result does not depend on how the work was sharded.

/** The phases whose shard statistics feed an iteration's metrics. */
export const METRIC_PHASES = ['rollout', 'analyze', 'rescore', 'update'] as const
export type MetricPhase = (typeof METRIC_PHASES)[number]

/** Each phase's shard statistics, in shard order; a phase that did not run has none. */
export type PhaseStats = Partial<Record<MetricPhase, readonly Record<string, number>[]>>

/** One metric from the shard statistics; null when the phase did not run or a statistic is missing. */
type Metric = (phases: PhaseStats) => number | null

function values(phases: PhaseStats, phase: MetricPhase, stat: string): number[] | null {
  const shards = phases[phase] ?? []
  if (shards.length === 0) return null
  const out = shards.map((s) => s[stat])
  return out.every((v): v is number => typeof v === 'number' && Number.isFinite(v)) ? out : null
}

const sum =
  (phase: MetricPhase, stat: string): Metric =>
  (phases) =>
    values(phases, phase, stat)?.reduce((a, b) => a + b, 0) ?? null

const max =
  (phase: MetricPhase, stat: string): Metric =>
  (phases) => {
    const v = values(phases, phase, stat)
    return v ? Math.max(...v) : null
  }

/** Σ num / Σ den over shards; null when there is nothing to divide by. */
const ratio =
  (phase: MetricPhase, num: string, den: string): Metric =>
  (phases) => {
    const n = sum(phase, num)(phases)
    const d = sum(phase, den)(phases)
    return n === null || d === null || d === 0 ? null : n / d
  }

/** The shards' means, weighted by `by` (each shard's episodes, samples, ...). */
const weighted =
  (phase: MetricPhase, stat: string, by: string): Metric =>
  (phases) => {
    const v = values(phases, phase, stat)
    const w = values(phases, phase, by)
    if (!v || !w) return null
    const total = w.reduce((a, b) => a + b, 0)
    // x·(w/total), not Σx·w/total: one shard gives exactly its own value
    return total === 0 ? null : v.reduce((a, x, i) => a + x * ((w[i] ?? 0) / total), 0)
  }

/**
 * The iteration's headline metrics, `phase/name` as docs/design.md §11.1 names metrics. Truncation counts are
 * prompts per phase (docs/algorithm.md §13); the OPD gate statistics are token means over the distilled tokens
 * (the update's, from the live student and the rescored teacher); timings add up the shards' compute seconds.
 */
export const ITERATION_METRICS = {
  'rollout/success_rate': weighted('rollout', 'successRate', 'episodes'),
  'rollout/episodes': sum('rollout', 'episodes'),
  'rollout/step_samples': sum('rollout', 'stepSamples'),
  'rollout/mean_reward': weighted('rollout', 'meanReward', 'episodes'),
  'rollout/mean_length': weighted('rollout', 'meanLength', 'episodes'),
  'rollout/invalid_rate': weighted('rollout', 'invalidRate', 'stepSamples'),
  /** Episodes a remote environment failed (timeouts, 5xx, a server restart): unsolved, none of their steps trained on. */
  'rollout/failed_episodes': sum('rollout', 'failedEpisodes'),
  'rollout/prompts': sum('rollout', 'prompts'),
  'rollout/prompts_truncated': sum('rollout', 'promptsTruncated'),
  'rollout/prompts_block_dropped': sum('rollout', 'promptsBlockDropped'),
  'rollout/prompts_failed': sum('rollout', 'promptsFailed'),
  'analyze/trajectories': sum('analyze', 'skills'),
  'analyze/parsed': sum('analyze', 'parsed'),
  'analyze/parse_rate': ratio('analyze', 'parsed', 'skills'),
  /** Parsed answers whose skill is the return format's placeholder ("string"), of all analyzed. */
  'analyze/placeholder_rate': ratio('analyze', 'placeholders', 'skills'),
  'analyze/prompts_truncated': sum('analyze', 'truncated'),
  'rescore/samples': sum('rescore', 'samples'),
  'rescore/teacher_samples': sum('rescore', 'teacherSamples'),
  'rescore/teacher_prompts': sum('rescore', 'teacherPrompts'),
  'rescore/teacher_prompts_truncated': sum('rescore', 'teacherPromptsTruncated'),
  'rescore/teacher_blocks_dropped': sum('rescore', 'teacherBlocksDropped'),
  'rescore/teacher_prompts_failed': sum('rescore', 'teacherPromptsFailed'),
  'rescore/max_sampler_gap': max('rescore', 'maxSamplerGap'),
  'rescore/teacher_gap_expert': weighted('rescore', 'teacherGapExpert', 'teacherGapExpertSamples'),
  'rescore/teacher_gap_other': weighted('rescore', 'teacherGapOther', 'teacherGapOtherSamples'),
  /** With the `control` OPD gate: log π_teacher − log π_control per response, on expert and on other actions. */
  'rescore/control_gap_expert': weighted('rescore', 'controlGapExpert', 'controlGapExpertSamples'),
  'rescore/control_gap_other': weighted('rescore', 'controlGapOther', 'controlGapOtherSamples'),
  'rescore/uncontrolled_samples': sum('rescore', 'uncontrolledSamples'),
  'update/samples': sum('update', 'samples'),
  'update/mini_batches': sum('update', 'miniBatches'),
  'update/loss': weighted('update', 'loss', 'samples'),
  'update/pg_loss': weighted('update', 'pgLoss', 'samples'),
  'update/kl': weighted('update', 'kl', 'samples'),
  'update/entropy': weighted('update', 'entropy', 'samples'),
  'update/opd_loss': weighted('update', 'opdLoss', 'samples'),
  'update/grad_norm': weighted('update', 'gradNorm', 'samples'),
  'update/clip_fraction': weighted('update', 'clipFraction', 'samples'),
  'update/first_clip_fraction': max('update', 'firstClipFraction'),
  'update/approx_kl': weighted('update', 'approxKl', 'samples'),
  'update/advantage_abs_mean': weighted('update', 'advantageAbsMean', 'samples'),
  'update/opd_tokens': sum('update', 'opdTokens'),
  'update/opd_gate_mean': weighted('update', 'opdGateMean', 'opdTokens'),
  'update/opd_positive_gap_share': weighted('update', 'opdPositiveGapShare', 'opdTokens'),
  'update/opd_gap_mean': weighted('update', 'opdGapMean', 'opdTokens'),
  'update/padded_samples': sum('update', 'paddedSamples'),
  'update/mix_steps': sum('update', 'mixSteps'),
  'update/mix_first_loss': max('update', 'mixFirstLoss'),
  'update/mix_last_loss': max('update', 'mixLastLoss'),
  'update/mix_analyzer_last_loss': max('update', 'mixAnalyzerLastLoss'),
  'update/mix_skill_last_loss': max('update', 'mixSkillLastLoss'),
  'timing/rollout_s': sum('rollout', 'seconds'),
  'timing/analyze_s': sum('analyze', 'seconds'),
  'timing/rescore_s': sum('rescore', 'seconds'),
  'timing/update_s': sum('update', 'seconds'),
} as const satisfies Record<string, Metric>

export type IterationMetricName = keyof typeof ITERATION_METRICS

/** Every headline metric; null where it does not apply (no analyze phase, no distilled token, ...). */
export function iterationMetrics(phases: PhaseStats): Record<IterationMetricName, number | null> {
  return Object.fromEntries(
    Object.entries(ITERATION_METRICS).map(([name, metric]) => [name, metric(phases)]),
  ) as Record<IterationMetricName, number | null>
}

/** What metrics.json holds. */
export interface IterationMetricsRecord {
  version: 1
  runId: string
  iteration: number
  algorithm: string
  configSha256: string
  /** Headline metrics named `phase/name`; null where they do not apply. */
  metrics: Record<IterationMetricName, number | null>
  /** Every phase shard's own statistics, as its manifest records them. */
  phases: Partial<Record<MetricPhase, Array<{ manifest: string; shard: number; stats: Record<string, number> }>>>
}
