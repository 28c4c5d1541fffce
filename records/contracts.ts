// The contract between the SEED workflows and the pipeline activities, in one leaf module: keys and small
// summaries only, never tensors or trajectories (a Temporal payload is capped at ~2 MB and stays in history).
// Types only; it imports nothing from the code on either side of the contract.
import type { AlgorithmName } from '../seed/algorithms.ts'
import type { HyperparameterOverrides } from '../seed/hyperparameters.ts'
import type { MetricPhase } from './iteration-metrics.ts'

/**
 * The store a run lives in (store/artifact-store.ts StoreIdentity): the random id kept at the store's root, which
 * a copy or another endpoint of the same bucket keeps, and where the store was when the run was planned.
 */
export interface StoreRef {
  id: string
  location: string
}

/** Identifies a run and the exact configuration its phases were computed from. */
export interface RunRef {
  runId: string
  configSha256: string
  /**
   * The store the run lives in: a worker bound to another store refuses the run's activities (StoreMismatch).
   * Absent in runs planned before it was recorded: any store is accepted.
   */
  store?: StoreRef
}

/** What every artifact-writing activity returns: the key and the hash of what it wrote. */
export interface ArtifactRef {
  key: string
  sha256: string
  bytes: number
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
  /**
   * The queue only the worker that ran the phase polls (a train worker's): its later model-bound phases go
   * there to find the policies it keeps loaded. Absent from a worker without one, and from older results.
   */
  residentQueue?: string
}

/** Where a forked run starts: a stored checkpoint of another run (seed/config.ts `fork`). */
export type ForkPoint = 'base' | 'stage1' | { iteration: number }

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
  /**
   * The splits of `evaluation.splits` (slots 1, 2, …), evaluated beside the periodic one at the start
   * checkpoints and at the end. Absent in runs planned before they existed: none.
   */
  endpointSplits?: string[]
  /** The run starts from another run's checkpoint (`fork` in the config); absent: from its own base. */
  fork?: { runId: string; at: ForkPoint }
}

/** What snapshot.json holds: the weights one iteration acts, scores and analyzes with. */
export interface Snapshot {
  version: 1
  run: RunRef
  iteration: number
  acting: CheckpointRef
  reference: CheckpointRef
  analyzer: CheckpointRef | null
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

/** The checkpoint an evaluation measures: the run's base, its Stage 1 (π_0), or the end of iteration k. */
export type EvaluationTarget = { kind: 'base' } | { kind: 'stage1' } | { kind: 'iteration'; iteration: number }

export interface EvaluateInput {
  run: RunRef
  target: EvaluationTarget
  checkpoint: CheckpointRef
  /**
   * Which evaluation: 0 (absent) the periodic one (`evaluation.split`), n ≥ 1 the n-th of `evaluation.splits`
   * (at the start checkpoints and the end only).
   */
  slot?: number
}

export interface StageSummary extends PhaseSummary {
  checkpoint: CheckpointRef
}

/** Where a forked run stands once the fork's checkpoints are copied into it. */
export interface ForkSummary extends PhaseSummary {
  /** The run's base checkpoint (copied). */
  base: CheckpointRef
  /** The forked run's next iteration: 0 from base or Stage 1, k + 1 from iteration k. */
  iteration: number
  acting: CheckpointRef
  reference: CheckpointRef
  /** π_0 where the fork point has one (Stage 1 or later in a run that had Stage 1). */
  stage1: CheckpointRef | null
}

/** One accepted hyperparameter change, as the workflow records it (its status query and continueAsNew carry the list). */
export interface HyperparameterChange {
  /** 0, 1, … in the order the run accepted them. */
  seq: number
  source: 'setHyperparameters' | 'retryIteration'
  /** The iteration and phase the run was in when the change was accepted. */
  iteration: number
  phase: string
  /** The change as given. */
  overrides: HyperparameterOverrides
  /** Every change so far, this one included: what the effective configuration adds to the run's. */
  cumulative: HyperparameterOverrides
  /** Workflow time of acceptance (ISO 8601). */
  at: string
  /** The effective configuration's hash after the change (set once recorded). */
  configSha256?: string
}

export interface RecordIterationInput {
  run: RunRef
  iteration: number
  algorithm: string
  snapshot: ArtifactRef
  /** Each phase's manifest keys (the phase summaries' `manifestKey`), in shard order; [] for a phase that did not run. */
  manifests: Record<MetricPhase, string[]>
}

export interface RecordIterationSummary extends PhaseSummary {
  /** manifest.json: every artifact of the iteration. */
  manifest: ArtifactRef
}

/** How Stage 1's annotation went (the `sft` and `annotate` manifests' stats): what progress, status and report show. */
export interface AnnotationCounts {
  trajectories: number
  /** Trajectories with a well-formed skill. */
  annotated: number
  /** Trajectories whose annotator request failed after its retries. */
  requestFailures: number
  /** Answers that did not parse as a skill. */
  unparsed: number
}

/** What a long phase reports in its heartbeats (`seedflow run` and the Web UI show it). */
export interface PhaseProgress {
  phase: string
  step: number
  steps: number
  /** Validation success at the last check, where the phase checks it. */
  successRate?: number
  /** The last training step's loss, where the phase trains. */
  loss?: number
}

/** The pipeline's activities, as the workflows call them. */
export interface PipelineActivities {
  /**
   * Validates the configuration and records the run; returns the plan the workflows follow. `resumed`: the run
   * was planned before (a rerun of its id), so its phases may be reused.
   */
  planRun(input: {
    runId: string
    config: unknown
    /** The store of the client that started the run; absent: the planning worker's store. */
    store?: StoreRef
  }): Promise<{ run: RunRef; plan: RunPlan; record: ArtifactRef; resumed?: boolean }>
  /** The base checkpoint: warm-start of the built-in model, or import of a Hugging Face folder. */
  prepare(input: { run: RunRef }): Promise<StageSummary>
  /** A forked run's start: the fork point's checkpoints (and Stage 1 skill library) copied from the other run. */
  fork(input: { run: RunRef }): Promise<ForkSummary>
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
   * Records an accepted hyperparameter change (records/hyperparameters.ts) and returns the RunRef whose
   * configSha256 names the changed run's effective configuration.
   */
  recordHyperparameters(input: {
    run: RunRef
    change: HyperparameterChange
  }): Promise<{ run: RunRef; record: ArtifactRef }>
  /**
   * Re-hashes every artifact the run may reuse (activities/verify-run.ts): what a rerun of a run id and an
   * operator's retry do before any phase is reused. Fails non-retryably (CorruptArtifact) naming each damaged key.
   */
  verifyRun(input: { run: RunRef }): Promise<{ artifacts: number; bytes: number }>
  /** The end of an iteration: metrics.json from the phase manifests, then manifest.json (written last). */
  recordIteration(input: RecordIterationInput): Promise<RecordIterationSummary>
}
