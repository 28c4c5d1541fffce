import { ApplicationFailure } from '@temporalio/common'
import type { EnvironmentIdentity } from '../compute/environment-check.ts'
import type { ArtifactStore, ObjectInfo } from '../store/artifact-store.ts'
import { sha256Hex } from '../store/hash.ts'
import { canonicalJson, getJson, putJsonIfAbsent } from '../store/json.ts'
import { keys } from '../store/keys.ts'
import type { ArtifactRef, StoreRef } from './contracts.ts'
import { SEEDFLOW_VERSION } from './seedflow-version.ts'

export interface RecordRunInput {
  runId: string
  /** The run configuration exactly as the user gave it. */
  config: Record<string, unknown>
  /** The store the run lives in (activities/store-binding.ts); absent: not recorded. */
  store?: StoreRef
  /** A remote environment's identity as planRun found it (URL, what its GET /info said); never a key. */
  environment?: EnvironmentIdentity
}

export interface RunRecord {
  runId: string
  config: Record<string, unknown>
  configSha256: string
  seedflowVersion: string
  createdAt: string
  /** The store the run lives in; absent in runs recorded before it was (any store is theirs). */
  store?: StoreRef
  /** A remote environment's identity when the run was planned (absent: a built-in environment). */
  environment?: EnvironmentIdentity
}

export function createRecordRunActivities(deps: { store: ArtifactStore; now?: () => Date }) {
  const now = deps.now ?? (() => new Date())
  return {
    /**
     * Writes `runs/{runId}/run.json` once. A retry with the same config returns the existing record; a
     * different config under the same run id fails for good (a run id names one configuration).
     */
    async recordRun(input: RecordRunInput): Promise<ArtifactRef> {
      const key = keys.runRecord(input.runId)
      const configSha256 = sha256Hex(Buffer.from(canonicalJson(input.config)))
      const record: RunRecord = {
        runId: input.runId,
        config: input.config,
        configSha256,
        seedflowVersion: SEEDFLOW_VERSION,
        createdAt: now().toISOString(),
        ...(input.store ? { store: { id: input.store.id, location: input.store.location } } : {}),
        ...(input.environment ? { environment: input.environment } : {}),
      }
      const result = await putJsonIfAbsent(deps.store, key, record)
      if (!result.created) {
        const existing = (await getJson(deps.store, key)) as RunRecord
        if (existing.configSha256 !== configSha256) {
          throw ApplicationFailure.nonRetryable(
            `run ${input.runId} already exists with config ${existing.configSha256}, not ${configSha256}; choose another run id`,
            'RunConfigConflict',
          )
        }
      }
      return refOf(result.info)
    },
  }
}

function refOf(info: ObjectInfo): ArtifactRef {
  return { key: info.key, sha256: info.sha256, bytes: info.bytes }
}

export type RecordRunActivities = ReturnType<typeof createRecordRunActivities>
