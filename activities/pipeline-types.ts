// The contract between the SEED workflows and the pipeline activities: keys and small summaries only, never
// tensors or trajectories (a Temporal payload is capped at ~2 MB and stays in history). Types only.
import type { AlgorithmName } from '../seed/algorithms.ts'
import type { HyperparameterChange } from './hyperparameters.ts'
import type { RecordIterationInput, RecordIterationSummary } from './iteration-record.ts'
import type { ArtifactRef } from './record-run.ts'

/** Identifies a run and the exact configuration its phases were computed from. */
export interface RunRef {
  runId: string
  configSha256: string
}

/** A checkpoint folder in the store (model.safetensors, config.json, tokenizer.json, optimizer state). */
export interface CheckpointRef {
  /** Key prefix of the folder, ending in '/'. */
  prefix: string
  /** sha256 of model.safetensors: what snapshots and manifests record as the checkpoint's identity. */
  sha256: string
}

/** What every phase activity returns (the phase wrapper's result, trimmed for the workflow history). */
export interface PhaseSummary {
  manifestKey: string
  reused: boolean
  outputs: Record<string, ArtifactRef>
  stats: Record<string, number>
}

/** How the workflows drive a run; derived from the validated run configuration. */
export interface RunPlan {
  algorithm: AlgorithmName
  env: string
  iterations: number
  /** Rollout / analyze shards per iteration (fan-out). */
  shards: number
  /** Evaluate every this many iterations (and always at the end). */
  evalEvery: number
  /** Continue-as-new after this many iterations (history stays small). */
  iterationsPerRun: number
  /**
   * Heartbeat timeout of the model-bound activities (rollout and train queues): how long Temporal waits for a
   * silent worker before it retries the activity elsewhere. Absent: 5 minutes. A worker option of the worker
   * that plans the run (`seedflow worker --heartbeat-timeout`), fixed for the run once planned.
   */
  heartbeatTimeoutSeconds?: number
}

export interface SnapshotInput {
  run: RunRef
  iteration: number
  /** π_k: acts, teaches and (for self-analysis rows) analyzes. */
  acting: CheckpointRef
  /** The KL reference (the row's start checkpoint). */
  reference: CheckpointRef
  /** Writes skills in `analyze`, when the row analyzes. */
  analyzer: CheckpointRef | null
}

export interface ShardInput {
  run: RunRef
  iteration: number
  shard: number
  snapshot: ArtifactRef
}

export interface AnalyzeInput extends ShardInput {
  rollouts: ArtifactRef
}

export interface RescoreInput {
  run: RunRef
  iteration: number
  snapshot: ArtifactRef
  rollouts: ArtifactRef[]
  skills: ArtifactRef[]
}

export interface UpdateInput {
  run: RunRef
  iteration: number
  snapshot: ArtifactRef
  rollouts: ArtifactRef[]
  rescore: ArtifactRef
}

export interface UpdateSummary extends PhaseSummary {
  checkpoint: CheckpointRef
}

export interface EvaluateInput {
  run: RunRef
  /** The iteration the checkpoint ends (−1: before Stage 2, e.g. warm-start or Stage 1). */
  iteration: number
  label: string
  checkpoint: CheckpointRef
}

export interface StageSummary extends PhaseSummary {
  checkpoint: CheckpointRef
}

/** The pipeline's activities, as the workflows call them. */
export interface PipelineActivities {
  /** Validates the configuration and records the run; returns the plan the workflows follow. */
  planRun(input: { runId: string; config: unknown }): Promise<{ run: RunRef; plan: RunPlan; record: ArtifactRef }>
  /** The base checkpoint: warm-start of the built-in model, or import of a Hugging Face folder. */
  prepare(input: { run: RunRef }): Promise<StageSummary>
  /**
   * The Stage 1 skill library without Stage 1 (rows that read it but start from the base checkpoint): roll out
   * the base policy and annotate, exactly as Stage 1 does before its SFT, writing the same annotations.
   */
  annotate(input: { run: RunRef; base: CheckpointRef }): Promise<PhaseSummary>
  /** Stage 1: roll out the base policy, annotate, supervised fine-tuning → π_0. */
  stage1(input: { run: RunRef; base: CheckpointRef }): Promise<StageSummary>
  snapshot(input: SnapshotInput): Promise<ArtifactRef>
  rollout(input: ShardInput): Promise<PhaseSummary>
  analyze(input: AnalyzeInput): Promise<PhaseSummary>
  rescore(input: RescoreInput): Promise<PhaseSummary>
  update(input: UpdateInput): Promise<UpdateSummary>
  evaluate(input: EvaluateInput): Promise<PhaseSummary>
  /**
   * Records an accepted hyperparameter change (activities/hyperparameters.ts) and returns the RunRef whose
   * configSha256 names the changed run's effective configuration.
   */
  recordHyperparameters(input: {
    run: RunRef
    change: HyperparameterChange
  }): Promise<{ run: RunRef; record: ArtifactRef }>
  /** The end of an iteration: metrics.json from the phase manifests, then manifest.json (written last). */
  recordIteration(input: RecordIterationInput): Promise<RecordIterationSummary>
}
