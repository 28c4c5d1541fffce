// One listing of everything a run wrote, and the questions the report asks of it: which iterations exist, the
// latest attempt of an artifact, the latest attempt of each evaluation and of each run-level phase shard. One
// pass over the store's list API (S3 pages included), then lookups in memory.
import type { ArtifactStore } from '../store/artifact-store.ts'
import { listAll } from '../store/artifact-store.ts'
import { keys } from '../store/keys.ts'

export interface RunListing {
  has(key: string): boolean
  /** The iterations with anything written, ascending. */
  iterations(): number[]
  /** The key of the highest attempt that exists (attempts are contiguous from 0), or undefined. */
  latest(keyOf: (attempt: number) => string): string | undefined
  /** The latest attempt of each evaluation file (`eval/0003.json`, `eval/stage1-validation.json`, …). */
  evaluations(): string[]
  /** The latest attempt of each shard manifest of a run-level phase (`sft/0000.manifest.json`, …). */
  stageManifests(phase: string): string[]
}

/** The highest attempt per name among keys `<name>[.attempt-N]<suffix>` under `folder`. */
function latestByName(all: readonly string[], folder: string, suffix: string): string[] {
  const best = new Map<string, { attempt: number; key: string }>()
  for (const key of all) {
    if (!key.startsWith(folder) || !key.endsWith(suffix)) continue
    const rest = key.slice(folder.length, key.length - suffix.length)
    const m = /^([^/.]+)(?:\.attempt-(\d+))?$/.exec(rest)
    if (!m) continue
    const name = m[1] as string
    const attempt = Number(m[2] ?? 0)
    if ((best.get(name)?.attempt ?? -1) < attempt) best.set(name, { attempt, key })
  }
  return [...best.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, v]) => v.key)
}

export async function listRun(store: ArtifactStore, runId: string): Promise<RunListing> {
  const prefix = keys.runPrefix(runId)
  const all: string[] = []
  for await (const { key } of listAll(store, prefix)) all.push(key)
  const present = new Set(all)
  const iterationPrefix = `${prefix}iterations/`
  return {
    has: (key) => present.has(key),
    iterations() {
      const ks = new Set<number>()
      for (const key of all) {
        const m = key.startsWith(iterationPrefix) ? /^(\d{4})\//.exec(key.slice(iterationPrefix.length)) : null
        if (m) ks.add(Number(m[1]))
      }
      return [...ks].sort((a, b) => a - b)
    },
    latest(keyOf) {
      let found: string | undefined
      for (let attempt = 0; present.has(keyOf(attempt)); attempt++) found = keyOf(attempt)
      return found
    },
    evaluations: () => latestByName(all, `${prefix}eval/`, '.json'),
    stageManifests: (phase) => latestByName(all, `${prefix}${phase}/`, '.manifest.json'),
  }
}
