// Deterministic: runs in the workflow sandbox. A phase boundary, the one idiom of the run (RunOperator.phase) and of
// each iteration child (seedIteration's hold.next): wait at the operator's gate, then show the phase that starts.
import { upsertSearchAttributes } from '@temporalio/workflow'
import type { OperatorGate } from './operator-gate.ts'
import { SEED_ITERATION, SEED_PHASE } from './search-attributes.ts'

/** What passing a boundary shows of the phase that starts; each caller shows its own part, nothing by default. */
export interface PhaseShown {
  /** Upserted as SeedPhase (the Web UI, visibility queries: `SeedPhase = "rollout"`). */
  seedPhase?: string
  /** Upserted as SeedIteration, after SeedPhase in the same upsert (only with `seedPhase`). */
  iteration?: number
  /** Records the phase where the workflow's status query reads it (after the upsert). */
  status?: () => void
}

/** Between phases, before `next`: waits while the gate is paused, throws what its abort makes, then shows the phase. */
export async function enterPhase(gate: OperatorGate, next: string, shown: PhaseShown = {}): Promise<void> {
  await gate.boundary(next)
  if (shown.seedPhase !== undefined) {
    if (shown.iteration === undefined) upsertSearchAttributes([{ key: SEED_PHASE, value: shown.seedPhase }])
    else
      upsertSearchAttributes([
        { key: SEED_PHASE, value: shown.seedPhase },
        { key: SEED_ITERATION, value: shown.iteration },
      ])
  }
  shown.status?.()
}
