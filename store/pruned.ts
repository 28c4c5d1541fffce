// The retention records of a run (runs/{run}/retention/{k}.json): manifests whose every entry is marked pruned,
// each written before its blobs are deleted, so no deletion goes unrecorded. Read by the phase wrapper (a phase
// whose output was pruned on purpose is still finished), the iteration record, retention itself and audit.
import type { ArtifactStore } from './artifact-store.ts'
import { readJsonUnder, type UnreadableObject } from './json.ts'
import { keys } from './keys.ts'
import type { Manifest, ManifestEntry, Pruning } from './manifest.ts'

export interface PrunedArtifact {
  key: string
  sha256: string
  bytes: number
  pruned: Pruning
  /** The retention record that lists it. */
  record: string
}

/**
 * Every artifact the run's readable retention records list, by key (a key listed twice keeps its first record),
 * and the records that could not be read: audit reports those and goes on. A store that fails still throws.
 */
export async function readPrunedRecords(
  store: ArtifactStore,
  runId: string,
): Promise<{ pruned: Map<string, PrunedArtifact>; unreadable: UnreadableObject[] }> {
  const pruned = new Map<string, PrunedArtifact>()
  const { read, unreadable } = await readJsonUnder(store, keys.retentionPrefix(runId))
  for (const { key: record, value } of read) {
    const manifest = value as Manifest | null
    const artifacts = manifest !== null && typeof manifest === 'object' ? (manifest.artifacts ?? {}) : {}
    for (const [key, entry] of Object.entries(artifacts) as Array<[string, ManifestEntry]>) {
      if (!entry?.pruned || pruned.has(key)) continue
      pruned.set(key, { key, sha256: entry.sha256, bytes: entry.bytes, pruned: entry.pruned, record })
    }
  }
  return { pruned, unreadable }
}

/** Every artifact the run's retention records list, by key; throws the first unreadable record's error. */
export async function readPruned(store: ArtifactStore, runId: string): Promise<Map<string, PrunedArtifact>> {
  const { pruned, unreadable } = await readPrunedRecords(store, runId)
  if (unreadable[0]) throw unreadable[0].error
  return pruned
}

/** True when `key` with this sha256 was pruned on purpose by the run's retention. */
export async function wasPruned(
  store: ArtifactStore,
  runId: string,
  artifact: { key: string; sha256: string },
): Promise<boolean> {
  return (await readPruned(store, runId)).get(artifact.key)?.sha256 === artifact.sha256
}
