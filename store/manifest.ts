import type { ObjectInfo } from './artifact-store.ts'

/** One artifact as a manifest records it. `pruned` marks a blob removed by retention on purpose. */
export interface ManifestEntry {
  sha256: string
  bytes: number
  /** Keys of the artifacts this one was computed from (lineage for audit). */
  parents: string[]
  pruned?: boolean
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
