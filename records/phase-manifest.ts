// What a finished phase shard leaves in the store (docs/design.md §4): its manifest, the record the idempotent
// phase wrapper (activities/phase.ts) writes last and reads first, and that audit, the report and the exports read.
import type { ObjectInfo } from '../store/artifact-store.ts'
import type { Phase } from '../store/keys.ts'

/** Where a phase shard lives: inside an iteration, or at run level (`iteration` omitted: warmstart, sft). */
export interface PhaseScope {
  runId: string
  phase: Phase
  shard: number
  iteration?: number
}

export interface PhaseManifest<S = Record<string, number>> {
  version: 1
  scope: PhaseScope
  attempt: number
  configSha256: string
  /** Input name → the sha256 of what the phase read. */
  inputs: Record<string, string>
  /** The hyperparameter overrides in effect (seed/hyperparameters.ts), when the run's were changed; in configSha256 too. */
  hyperparameters?: Record<string, unknown>
  outputs: Record<string, ObjectInfo>
  stats: S
  seedflowVersion: string
  createdAt: string
}
