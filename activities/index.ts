import type { Engine } from '../engine/index.ts'
import { createRecordRunActivities } from '../records/record-run.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import type { PhaseCounters, PhaseHooks } from './phase.ts'
import { createPipelineActivities } from './pipeline.ts'

export type { ArtifactRef } from '../records/contracts.ts'
export type { RecordRunInput, RunRecord } from '../records/record-run.ts'

/** Every activity, over injected dependencies; workers are the only callers with real ones. */
export function createActivities(deps: {
  store: ArtifactStore
  engine: Engine
  counters?: PhaseCounters
  phaseHooks?: PhaseHooks
  episodesPerShard?: number
  heartbeatTimeoutSeconds?: number
  residentQueue?: string
}) {
  return { ...createRecordRunActivities(deps), ...createPipelineActivities(deps) }
}

export type Activities = ReturnType<typeof createActivities>
