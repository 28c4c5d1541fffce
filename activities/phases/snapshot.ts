// Snapshot: the weights one iteration acts, scores and analyzes with, fixed in snapshot.json before any shard runs.

import type { ArtifactRef, Snapshot, SnapshotInput } from '../../records/contracts.ts'
import { putJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import { type PhaseDef, scopeOf } from '../phase-activity.ts'
import { artifactRef } from '../phase-io.ts'

export const snapshotPhase: PhaseDef<SnapshotInput, null, ArtifactRef> = {
  describe: () => 'snapshot',
  needs: () => null,
  async plan(input) {
    const { run, iteration } = input
    const snapshot: Snapshot = {
      version: 1,
      run: { runId: run.runId, configSha256: run.configSha256 }, // not its store: the bytes are the same in a copy
      iteration,
      acting: input.acting,
      reference: input.reference,
      analyzer: input.analyzer,
    }
    return {
      scope: scopeOf(run, 'snapshot', 0, iteration),
      inputs: {
        acting: input.acting.sha256,
        reference: input.reference.sha256,
        ...(input.analyzer ? { analyzer: input.analyzer.sha256 } : {}),
      },
      compute: async ({ store, attempt }) => ({
        outputs: { snapshot: await putJson(store, keys.snapshot(run.runId, iteration, attempt), snapshot) },
        stats: {},
      }),
    }
  },
  result: (_, outputs) => artifactRef(outputs.snapshot as NonNullable<(typeof outputs)['snapshot']>),
}
