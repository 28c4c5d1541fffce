// The retention records of a run (runs/{run}/retention/{k}.json): manifests whose every entry is marked pruned,
// each written before its blobs are deleted, so no deletion goes unrecorded. Read by the phase wrapper (a phase
// whose output was pruned on purpose is still finished), the iteration record, retention itself and audit.
import { type ArtifactStore, listAll } from './artifact-store.ts'
import { getJson } from './json.ts'
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

/** Every artifact the run's retention records list, by key (a key listed twice keeps its first record). */
export async function readPruned(store: ArtifactStore, runId: string): Promise<Map<string, PrunedArtifact>> {
  const out = new Map<string, PrunedArtifact>()
  for await (const { key: record } of listAll(store, keys.retentionPrefix(runId))) {
    const manifest = (await getJson(store, record)) as Manifest
    for (const [key, entry] of Object.entries(manifest.artifacts ?? {}) as Array<[string, ManifestEntry]>) {
      if (!entry.pruned || out.has(key)) continue
      out.set(key, { key, sha256: entry.sha256, bytes: entry.bytes, pruned: entry.pruned, record })
    }
  }
  return out
}

/** True when `key` with this sha256 was pruned on purpose by the run's retention. */
export async function wasPruned(
  store: ArtifactStore,
  runId: string,
  artifact: { key: string; sha256: string },
): Promise<boolean> {
  return (await readPruned(store, runId)).get(artifact.key)?.sha256 === artifact.sha256
}
