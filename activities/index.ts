import type { ArtifactStore } from '../store/artifact-store.ts'
import { createRecordRunActivities } from './record-run.ts'

export type { ArtifactRef, RecordRunInput, RunRecord } from './record-run.ts'

/** Every activity, over injected dependencies; workers are the only callers with real ones. */
export function createActivities(deps: { store: ArtifactStore }) {
  return { ...createRecordRunActivities(deps) }
}

export type Activities = ReturnType<typeof createActivities>
