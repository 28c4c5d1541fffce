import type { ObjectInfo } from './artifact-store.ts'

/** Why and when retention removed a blob on purpose: what tells `seedflow audit` pruned from broken. */
export interface Pruning {
  at: string
  reason: string
}

/** One artifact as a manifest records it. */
export interface ManifestEntry {
  sha256: string
  bytes: number
  /** Keys of the artifacts this one was computed from (lineage for audit). */
  parents: string[]
  /** Set in retention records only: the blob was (or is about to be) deleted by retention. */
  pruned?: Pruning
}

/** Artifact key → what was written; what `seedflow audit` checks. */
export interface Manifest {
  version: 1
  runId: string
  configSha256: string
  seedflowVersion: string
  createdAt: string
  artifacts: Record<string, ManifestEntry>
}

export function manifestEntry(info: ObjectInfo, parents: string[] = []): ManifestEntry {
  return { sha256: info.sha256, bytes: info.bytes, parents: [...parents] }
}
