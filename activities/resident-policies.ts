// Policies kept loaded in a worker between activities, so that the update of iteration k and the rescore and
// update of iteration k + 1 on the same worker do not read the checkpoint they hold from the store again, and do
// not load their sessions again. An entry is keyed by the store's identity, the checkpoint's sha256 and the
// engine settings it was loaded with, never by a name, and holds exactly what loading that checkpoint from the
// store would give: its weights (or adapters over its base) and, in `optimizer`, the stored optimizer state not
// yet loaded into the trainer (undefined: the trainer holds the stored state already, or none is stored and its
// moments are fresh). Correctness never depends on a hit: a miss loads from the store as before.

import type { Policy } from '../compute/index.ts'
import type { AdamWState } from '../engine/index.ts'
import type { EngineSettingsConfig } from '../seed/config.ts'

export interface ResidentPolicy {
  policy: Policy
  optimizer?: AdamWState
}

export class ResidentPolicies {
  readonly capacity: number
  /** In use order: the least recently kept first. */
  readonly #entries = new Map<string, ResidentPolicy>()
  /** Hits and misses since the worker started, for its counters and for tests. */
  readonly stats = { hits: 0, misses: 0, kept: 0, evicted: 0 }

  /** `capacity` policies at most; default SEEDFLOW_RESIDENT_POLICIES, else 2 (0: none, every phase loads from the store). */
  constructor(capacity = residentCapacity()) {
    this.capacity = capacity
  }

  static key(storeId: string, sha256: string, settings: EngineSettingsConfig): string {
    return `${storeId}/${sha256}/${JSON.stringify(settings)}`
  }

  /** The entry of `key`, removed (its taker owns the policy now), or undefined. */
  take(key: string): ResidentPolicy | undefined {
    const entry = this.#entries.get(key)
    if (!entry) {
      this.stats.misses++
      return undefined
    }
    this.#entries.delete(key)
    this.stats.hits++
    return entry
  }

  /**
   * Keeps `entry` under `key` for a later activity (it must hold exactly that checkpoint, see the file's
   * comment); an entry already there is released, and the least recently kept beyond capacity too.
   */
  async keep(key: string, entry: ResidentPolicy): Promise<void> {
    const stale = this.#entries.get(key)
    this.#entries.delete(key)
    this.#entries.set(key, entry)
    this.stats.kept++
    const released = stale && stale.policy !== entry.policy ? [stale] : []
    while (this.#entries.size > this.capacity) {
      const [oldest, evicted] = this.#entries.entries().next().value as [string, ResidentPolicy]
      this.#entries.delete(oldest)
      released.push(evicted)
      this.stats.evicted++
    }
    await Promise.all(released.map((e) => e.policy.trainer.release()))
  }

  get size(): number {
    return this.#entries.size
  }

  /** Releases every entry (a worker shutting down, a test). */
  async clear(): Promise<void> {
    const all = [...this.#entries.values()]
    this.#entries.clear()
    await Promise.all(all.map((e) => e.policy.trainer.release()))
  }
}

function residentCapacity(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.SEEDFLOW_RESIDENT_POLICIES
  if (raw === undefined || raw === '') return 2
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 0)
    throw new RangeError(`SEEDFLOW_RESIDENT_POLICIES must be an integer ≥ 0, got ${JSON.stringify(raw)}`)
  return n
}
