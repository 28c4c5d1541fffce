// How Stage 1's annotation went, from the manifest of the phase that annotated (`sft` for Stage 1, `annotate` for
// rows that read the library but start from the base): how many trajectories got a skill, and for those that did
// not, why (the failure codes and a reason of each, from the annotations file the manifest lists).
import { parseSkillLines } from '../records/skill-library.ts'
import type { ArtifactStore, ObjectInfo } from '../store/artifact-store.ts'
import { getExpected } from '../store/json.ts'
import type { DamageLog } from './damage.ts'

export interface AnnotationFailure {
  /** The record's failure code: `request-failed` (no answer from the annotator) or the parser's. */
  code: string
  count: number
  /** The reason one of them records. */
  example: string
}

export interface AnnotationData {
  phase: string
  trajectories: number
  annotated: number
  failed: number
  /** Trajectories the annotator gave no answer for, and answers that did not parse (the manifest's counts). */
  requestFailures: number | null
  unparsed: number | null
  /** By failure code, most frequent first; empty when the annotations file could not be read. */
  failures: AnnotationFailure[]
}

/** The part of a phase manifest read here. */
export interface AnnotatingManifest {
  outputs?: Record<string, ObjectInfo>
  stats?: Record<string, unknown>
}

const count = (stats: Record<string, unknown>, name: string): number | null => {
  const v = stats[name]
  return typeof v === 'number' && Number.isFinite(v) ? v : null
}

/** Null when the manifest records no annotation counts (a phase that did not annotate, or an older manifest). */
export async function annotationOf(
  store: ArtifactStore,
  phase: string,
  manifest: AnnotatingManifest,
  damage: DamageLog,
): Promise<AnnotationData | null> {
  const stats = manifest.stats ?? {}
  const trajectories = count(stats, 'trajectories')
  const annotated = count(stats, 'annotated')
  if (trajectories === null || annotated === null) return null
  const failed = Math.max(0, trajectories - annotated)
  const file = manifest.outputs?.annotations
  const failures = failed > 0 && file ? ((await damage.read(file.key, () => failuresIn(store, file))) ?? []) : []
  return {
    phase,
    trajectories,
    annotated,
    failed,
    requestFailures: count(stats, 'requestFailures'),
    unparsed: count(stats, 'unparsed'),
    failures,
  }
}

async function failuresIn(store: ArtifactStore, file: ObjectInfo): Promise<AnnotationFailure[]> {
  const bytes = await getExpected(store, file.key, file.sha256)
  const byCode = new Map<string, AnnotationFailure>()
  for (const record of parseSkillLines(bytes.toString('utf8'), file.key)) {
    if (record.ok) continue
    const code = record.failure?.code ?? 'unknown'
    const seen = byCode.get(code)
    if (seen) seen.count++
    else byCode.set(code, { code, count: 1, example: record.failure?.reason ?? '' })
  }
  return [...byCode.values()].sort((a, b) => b.count - a.count || a.code.localeCompare(b.code))
}
