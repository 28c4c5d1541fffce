// Every artifact key of docs/design.md §5.1, built here and nowhere else. Pure: workflows import it.
import { assertValidKey } from './key-check.ts'

/** Run ids are workflow ids and key segments: letters, digits, `.`, `_`, `-`; at most 128. */
export const RUN_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/

export class InvalidRunIdError extends Error {
  override name = 'InvalidRunIdError'
  constructor(readonly runId: string) {
    super(
      `invalid run id ${JSON.stringify(runId)}: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit`,
    )
  }
}

export function assertValidRunId(runId: string): void {
  if (typeof runId !== 'string' || !RUN_ID_PATTERN.test(runId) || runId === '.' || runId === '..') {
    throw new InvalidRunIdError(String(runId))
  }
}

/**
 * Files of a checkpoint folder: safetensors + Hugging Face config + tokenizer (with tokenizer_config.json, which
 * carries the chat template, for imported models); optimizer state on iterations. A LoRA checkpoint's
 * model.safetensors holds the merged weights (what the policy computes: serving and export read it as a plain
 * model), `adapter/` the PEFT adapter and lora_base.safetensors the frozen base the adapter trains on.
 */
export const CHECKPOINT_FILES = [
  'model.safetensors',
  'optimizer.safetensors',
  'config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'adapter/adapter_config.json',
  'adapter/adapter_model.safetensors',
  'lora_base.safetensors',
] as const
export type CheckpointFile = (typeof CHECKPOINT_FILES)[number]

/** Phases that write per-shard manifests and progress records. */
export const PHASES = [
  'snapshot',
  'rollout',
  'analyze',
  'rescore',
  'update',
  'evaluate',
  'metrics',
  'sft',
  'warmstart',
  'import',
  'annotate',
  'fork',
] as const
export type Phase = (typeof PHASES)[number]

const pad4 = (n: number): string => {
  if (!Number.isInteger(n) || n < 0 || n > 9999) throw new RangeError(`index must be an integer in 0..9999, got ${n}`)
  return String(n).padStart(4, '0')
}

/**
 * The name of attempt `attempt` of a phase output: attempt 0 is the plain name; a recomputation after a
 * changed config or input goes beside it (`0003.jsonl.gz` → `0003.attempt-1.jsonl.gz`), the old one kept.
 */
function attempted(name: string, attempt: number): string {
  if (!Number.isInteger(attempt) || attempt < 0)
    throw new RangeError(`attempt must be a non-negative integer, got ${attempt}`)
  if (attempt === 0) return name
  const dot = name.indexOf('.')
  return dot < 0 ? `${name}.attempt-${attempt}` : `${name.slice(0, dot)}.attempt-${attempt}${name.slice(dot)}`
}

function key(...parts: string[]): string {
  const k = parts.join('/')
  assertValidKey(k)
  return k
}

function run(runId: string): string {
  assertValidRunId(runId)
  return `runs/${runId}`
}

function iteration(runId: string, k: number): string {
  return `${run(runId)}/iterations/${pad4(k)}`
}

export const keys = {
  /** Prefix of everything a run wrote (for listing and audit). */
  runPrefix: (runId: string) => `${run(runId)}/`,
  /** Config as given, its hash, seedflow version, created-at. */
  runRecord: (runId: string) => key(run(runId), 'run.json'),
  /** The plan the workflows follow (shards per iteration), written by planRun and read by the shard phases. */
  runPlan: (runId: string) => key(run(runId), 'plan.json'),
  /** The base checkpoint (warm-start or import); a recomputed attempt goes beside the first (`checkpoint.attempt-1/`). */
  baseCheckpoint: (runId: string, file: CheckpointFile, attempt = 0) =>
    key(run(runId), 'base', attempted('checkpoint', attempt), file),

  /** Manifest of a run-level phase shard (warmstart, sft, ...), outside any iteration. */
  stagePhaseManifest: (runId: string, phase: Phase, shard: number, attempt = 0) =>
    key(run(runId), phase, attempted(`${pad4(shard)}.manifest.json`, attempt)),
  stagePhaseProgress: (runId: string, phase: Phase, shard: number, attempt = 0) =>
    key(run(runId), phase, attempted(`${pad4(shard)}.progress.json`, attempt)),

  sftTrajectories: (runId: string, shard: number, attempt = 0) =>
    key(run(runId), 'sft', 'trajectories', attempted(`${pad4(shard)}.jsonl.gz`, attempt)),
  /** The Stage 1 skill library (written by `sft` or `annotate`, under that phase's attempt). */
  sftAnnotations: (runId: string, attempt = 0) => key(run(runId), 'sft', attempted('annotations.jsonl', attempt)),
  /**
   * One reply of Stage 1's external annotator, by the sha256 of its analyzer prompt: written as it arrives and
   * shared by every attempt of `sft` or `annotate`, so a retried attempt asks only for what it does not have.
   */
  sftReply: (runId: string, promptHash: string) => {
    if (!/^[0-9a-f]{64}$/.test(promptHash)) throw new RangeError(`a prompt hash is 64 hex digits, got ${promptHash}`)
    return key(run(runId), 'sft', 'replies', `${promptHash}.json`)
  },
  sftCheckpoint: (runId: string, file: CheckpointFile, attempt = 0) =>
    key(run(runId), 'sft', attempted('checkpoint', attempt), file),

  iterationPrefix: (runId: string, k: number) => `${iteration(runId, k)}/`,
  snapshot: (runId: string, k: number, attempt = 0) => key(iteration(runId, k), attempted('snapshot.json', attempt)),
  rollouts: (runId: string, k: number, shard: number, attempt = 0) =>
    key(iteration(runId, k), 'rollouts', attempted(`${pad4(shard)}.jsonl.gz`, attempt)),
  skills: (runId: string, k: number, shard: number, attempt = 0) =>
    key(iteration(runId, k), 'skills', attempted(`${pad4(shard)}.jsonl`, attempt)),
  rescore: (runId: string, k: number, shard: number, attempt = 0) =>
    key(iteration(runId, k), 'rescore', attempted(`${pad4(shard)}.bin`, attempt)),
  /** One per finished phase shard: outputs + sha256, input hashes, config hash. */
  phaseManifest: (runId: string, k: number, phase: Phase, shard: number, attempt = 0) =>
    key(iteration(runId, k), phase, attempted(`${pad4(shard)}.manifest.json`, attempt)),
  /** Heartbeat-resumable partial progress; never read as finished. */
  phaseProgress: (runId: string, k: number, phase: Phase, shard: number, attempt = 0) =>
    key(iteration(runId, k), phase, attempted(`${pad4(shard)}.progress.json`, attempt)),
  checkpoint: (runId: string, k: number, file: CheckpointFile, attempt = 0) =>
    key(iteration(runId, k), attempted('checkpoint', attempt), file),
  /** The iteration's metrics (the `metrics` phase; a recomputed attempt goes beside the first). */
  metrics: (runId: string, k: number, attempt = 0) => key(iteration(runId, k), attempted('metrics.json', attempt)),
  /** Written last in an iteration: every artifact key + sha256 + bytes + parents + config hash. */
  iterationManifest: (runId: string, k: number, attempt = 0) =>
    key(iteration(runId, k), attempted('manifest.json', attempt)),

  /** The evaluation of iteration k's checkpoint; `split` names an evaluation of `evaluation.splits` (absent: the periodic one). */
  evaluation: (runId: string, k: number, attempt = 0, split?: string) =>
    key(run(runId), 'eval', attempted(`${pad4(k)}${split ? `-${split}` : ''}.json`, attempt)),
  /** Evaluations before Stage 2 (`base`: the warm-start or imported checkpoint; `stage1`: π_0). */
  stageEvaluation: (runId: string, stage: 'base' | 'stage1', attempt = 0, split?: string) =>
    key(run(runId), 'eval', attempted(`${stage}${split ? `-${split}` : ''}.json`, attempt)),

  /** What retention pruned after iteration k: a manifest whose every entry is marked pruned (written before deleting). */
  retentionRecord: (runId: string, k: number) => key(run(runId), 'retention', `${pad4(k)}.json`),
  retentionPrefix: (runId: string) => `${run(runId)}/retention/`,
  /** One accepted hyperparameter change (the `setHyperparameters` update), numbered from 0 in the order accepted. */
  hyperparameterChange: (runId: string, seq: number) => key(run(runId), 'hyperparameters', `${pad4(seq)}.json`),
  hyperparametersPrefix: (runId: string) => `${run(runId)}/hyperparameters/`,
  /** The effective configuration after hyperparameter changes, under its sha256. */
  effectiveConfig: (runId: string, sha256: string) => key(run(runId), 'configs', `${sha256}.json`),
} as const
