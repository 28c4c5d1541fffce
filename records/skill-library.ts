// The Stage 1 skill library (the parsed annotations of runs/{run}/sft/annotations.jsonl), which rows with a
// library skill read: the pipeline's phases and `seedflow eval --algorithm-row` alike.

import type { SkillRecord } from '../compute/index.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { latestAttempt } from '../store/attempts.ts'
import { getExpected } from '../store/json.ts'
import { keys } from '../store/keys.ts'

export class LibraryMissingError extends Error {
  override name = 'LibraryMissingError'
}

/** A JSON-lines file of skill records; a line that is not JSON throws a SyntaxError naming the key and line. */
export function parseSkillLines(text: string, key: string): SkillRecord[] {
  return text
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l, i) => {
      try {
        return JSON.parse(l) as SkillRecord
      } catch (error) {
        throw new SyntaxError(`${key}: line ${i + 1} is not JSON (${(error as Error).message})`)
      }
    })
}

/** The key of the run's latest annotations (a recomputed `sft` or `annotate` writes beside the first). */
export async function skillLibraryKey(store: ArtifactStore, runId: string): Promise<string | undefined> {
  const attempt = await latestAttempt(store, (a) => keys.sftAnnotations(runId, a))
  return attempt === undefined ? undefined : keys.sftAnnotations(runId, attempt)
}

/**
 * The run's parsed Stage 1 annotations (records with a skill) and the annotations' sha256; LibraryMissingError,
 * saying who needs them, when there are none.
 */
export async function readAnnotations(
  store: ArtifactStore,
  runId: string,
  reader: string,
): Promise<{ records: SkillRecord[]; sha256: string }> {
  const key = (await skillLibraryKey(store, runId)) ?? keys.sftAnnotations(runId)
  const head = await store.head(key)
  if (!head) {
    throw new LibraryMissingError(
      `${reader} reads the Stage 1 skill library, but ${key} does not exist (Stage 1 did not run)`,
    )
  }
  const records = parseSkillLines((await getExpected(store, key, head.sha256)).toString('utf8'), key).filter(
    (s) => s.ok && s.skill,
  )
  if (records.length === 0) throw new LibraryMissingError(`${key} holds no parsed skill`)
  return { records, sha256: head.sha256 }
}

/** The run's parsed Stage 1 skills and the annotations' sha256; LibraryMissingError when there are none. */
export async function readSkillLibrary(
  store: ArtifactStore,
  runId: string,
  algorithm: string,
): Promise<{ skills: string[]; sha256: string }> {
  const { records, sha256 } = await readAnnotations(store, runId, `algorithm ${algorithm}`)
  return { skills: records.map((s) => s.skill as string), sha256 }
}
