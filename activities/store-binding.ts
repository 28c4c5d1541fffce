// One store per run (docs/design.md §10.1): a run records the identity of the store it lives in (RunRef.store,
// run.json), and a worker bound to another store refuses the run's activities before it touches its own store.
// Otherwise a run's phases split across two stores and fail with a NotFoundError that points at a loss that never
// happened. Identities match by id: a copied folder, and one bucket through the write gate or directly, keep it.

import type { StoreRef } from '../records/contracts.ts'
import { classifyFailure } from '../records/failures.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'

/** A worker was handed an activity of a run that lives in another store. */
export class StoreMismatchError extends Error {
  override name = 'StoreMismatchError'
  constructor(
    readonly runId: string,
    readonly runStore: StoreRef,
    readonly workerStore: StoreRef,
  ) {
    super(
      `run ${runId} lives in store ${describeStore(runStore)}, but this worker's store is ` +
        `${describeStore(workerStore)}; serve the run from workers started with its store (SEEDFLOW_ARTIFACTS_DIR or ` +
        'the SEEDFLOW_S3_* variables), stop this one, then retry the run',
    )
  }
}

/** `<id> (<location>)`: how messages and `seedflow status` name a store. */
export function describeStore(store: StoreRef): string {
  return `${store.id} (${store.location})`
}

/**
 * The identity a worker's activities compare runs with: its own store's (the store reads it once, and asks again
 * after a failure).
 */
export function storeBinding(store: ArtifactStore) {
  const identity = (): Promise<StoreRef> => store.identity()
  return {
    identity,
    /** Throws StoreMismatchError when `run` lives in another store; a run that records none is accepted. */
    async check(runId: string, runStore: StoreRef | undefined): Promise<void> {
      if (runStore === undefined) return
      const mine = await identity()
      if (mine.id !== runStore.id) throw new StoreMismatchError(runId, runStore, mine)
    },
  }
}

export type StoreBinding = ReturnType<typeof storeBinding>

/** The run and its store an activity input names: `run` (RunRef) for most, `runId` and `store` for planRun. */
function runOf(input: unknown): { runId: string; store: StoreRef | undefined } | undefined {
  if (typeof input !== 'object' || input === null) return undefined
  const { run, runId, store } = input as { run?: { runId: string; store?: StoreRef }; runId?: string; store?: StoreRef }
  if (run && typeof run === 'object') return { runId: run.runId, store: run.store }
  if (typeof runId === 'string') return { runId, store }
  return undefined
}

/**
 * Every activity of `activities`, checked first against the worker's store: the one place where a run's
 * activities are refused (non-retryably, StoreMismatch) before any of them reads or writes.
 */
export function boundToStore<A extends object>(binding: StoreBinding, activities: A): A {
  const bound: Record<string, unknown> = {}
  for (const [name, activity] of Object.entries(activities)) {
    bound[name] = async (input: unknown) => {
      const run = runOf(input)
      if (run) {
        try {
          await binding.check(run.runId, run.store)
        } catch (error) {
          throw classifyFailure(name, error)
        }
      }
      return (activity as (input: unknown) => Promise<unknown>)(input)
    }
  }
  return bound as A
}
