// What a resumed run checks before it reuses anything (docs/design.md §4): a store answers a head with the sha256
// it recorded at write time, and a flipped bit keeps an object's size, so only re-hashing the bytes proves them.
// A rerun of a run id, or an operator's retry, first re-hashes every artifact that the run's current manifests
// (the newest attempt of each phase shard and iteration) record, with run.json and plan.json, and names every
// damaged one at once. Older attempts are history: audit reports them, a resumed run never reuses them.

import { type AuditProblem, auditRun } from '../records/audit.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { keys } from '../store/keys.ts'

/**
 * Kinds of audit problem that make a stored artifact unfit for reuse. A missing output is not one: the phase that
 * wrote it computes it again under a new attempt (how an operator repairs a damaged output: delete it, retry).
 * Lineage links are audit's own concern.
 */
const DAMAGE = new Set<AuditProblem['kind']>(['hash', 'size', 'unreadable', 'config'])

export interface RunVerification {
  /** Distinct artifacts re-hashed and their bytes. */
  artifacts: number
  bytes: number
  /** One per damaged artifact that a current manifest, run.json or plan.json records. */
  damaged: AuditProblem[]
}

/** Re-hashes what the run may reuse; never throws for damage (it is listed), only for a store that fails. */
export async function verifyRun(store: ArtifactStore, runId: string): Promise<RunVerification> {
  const report = await auditRun(store, runId)
  const current = new Set(report.currentManifests)
  const ownRecords = new Set([keys.runRecord(runId), keys.runPlan(runId)])
  const damaged = report.broken.filter(
    (p) => DAMAGE.has(p.kind) && (current.has(p.manifest) || ownRecords.has(p.key) || ownRecords.has(p.manifest)),
  )
  return { artifacts: report.artifacts, bytes: report.bytes, damaged }
}
