import type { ArtifactStore } from './artifact-store.ts'

/**
 * The highest attempt whose key `exists` (default: the store has it), or undefined when attempt 0 does not.
 * Attempts are contiguous: the phase wrapper computes attempt n only after attempts 0 … n-1 wrote manifests.
 */
export async function latestAttempt(
  store: ArtifactStore,
  keyOf: (attempt: number) => string,
  exists: (key: string) => Promise<boolean> | boolean = async (key) => (await store.head(key)) !== undefined,
): Promise<number | undefined> {
  let found: number | undefined
  for (let attempt = 0; await exists(keyOf(attempt)); attempt++) found = attempt
  return found
}
