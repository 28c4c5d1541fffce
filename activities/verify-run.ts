// What a resumed run checks before it reuses anything (docs/design.md §4): a store answers a head with the sha256
// it recorded at write time, and a flipped bit keeps an object's size, so only re-hashing the bytes proves them.
// A rerun of a run id, or an operator's retry, first re-hashes every artifact that the run's current manifests
// (the newest attempt of each phase shard and iteration) record, with run.json and plan.json, and names every
// damaged one at once. Older attempts are history: audit reports them, a resumed run never reuses them.
import { type ArtifactStore, listAll } from '../store/artifact-store.ts'
import { keys } from '../store/keys.ts'
import { type AuditProblem, auditRun } from './audit.ts'

/**
 * Kinds of audit problem that make a stored artifact unfit for reuse. A missing output is not one: the phase that
 * wrote it computes it again under a new attempt (how an operator repairs a damaged output: delete it, retry).
 * Lineage links are audit's own concern.
 */
const DAMAGE = new Set<AuditProblem['kind']>(['hash', 'size', 'unreadable', 'config'])

/** `…/0003.attempt-2.manifest.json` → [`…/0003.manifest.json`, 2]; undefined for a key that is no manifest. */
function manifestFamily(key: string): [string, number] | undefined {
  if (!key.endsWith('.json') || !/(^|\/)(\d{4}|manifest)(\.attempt-\d+)?(\.manifest)?\.json$/.test(key)) return
  const m = /^(.*?)\.attempt-(\d+)(\..*)$/.exec(key)
  return m ? [`${m[1]}${m[3]}`, Number(m[2])] : [key, 0]
}

/** The manifests a resumed run can reuse: the newest attempt of each family. */
async function currentManifests(store: ArtifactStore, runId: string): Promise<Set<string>> {
  const newest = new Map<string, [string, number]>()
  for await (const { key } of listAll(store, keys.runPrefix(runId))) {
    if (key.includes('/retention/')) continue
    const family = manifestFamily(key)
    if (!family) continue
    const seen = newest.get(family[0])
    if (!seen || seen[1] < family[1]) newest.set(family[0], [key, family[1]])
  }
  return new Set([...newest.values()].map(([key]) => key))
}

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
  const current = await currentManifests(store, runId)
  const ownRecords = new Set([keys.runRecord(runId), keys.runPlan(runId)])
  const damaged = report.broken.filter(
    (p) => DAMAGE.has(p.kind) && (current.has(p.manifest) || ownRecords.has(p.key) || ownRecords.has(p.manifest)),
  )
  return { artifacts: report.artifacts, bytes: report.bytes, damaged }
}
