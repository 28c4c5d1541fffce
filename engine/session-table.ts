// The sessions an engine holds, by model id, the same in the local and native engines: one session per distinct
// model however many loads name it (each load a reference, `release` gives one back), a session whose making failed
// forgotten, and beyond `max` the least recently used evicted (one nobody holds first).
import { EngineRuntimeError } from './errors.ts'

export class SessionTable<S> {
  readonly #sessions = new Map<string, Promise<S>>()
  readonly #refs = new Map<string, number>()

  /** `drop`: frees an evicted session (the engine's own release of it). */
  constructor(
    private readonly max: number,
    private readonly drop: (id: string, session: Promise<S>) => void,
  ) {}

  /** Takes a reference on `id`'s session, made by `make` when there is none. */
  acquire(id: string, make: () => Promise<S>): Promise<S> {
    this.#refs.set(id, (this.#refs.get(id) ?? 0) + 1)
    const held = this.#sessions.get(id)
    if (held) return held
    const made = make()
    made.catch(() => {
      if (this.#sessions.get(id) === made) this.#sessions.delete(id)
    })
    this.#sessions.set(id, made)
    while (this.#sessions.size > this.max) {
      const ids = [...this.#sessions.keys()]
      const oldest = ids.find((i) => !this.#refs.get(i)) ?? (ids[0] as string)
      const evicted = this.#sessions.get(oldest) as Promise<S>
      this.#sessions.delete(oldest)
      this.#refs.delete(oldest)
      this.drop(oldest, evicted)
    }
    return made
  }

  /** The session of a loaded model, now the most recently used. */
  get(id: string): Promise<S> {
    const s = this.#sessions.get(id)
    if (!s) throw new EngineRuntimeError(`model ${id.slice(0, 12)} is not loaded in this engine`)
    this.#sessions.delete(id) // re-insert: most recently used last
    this.#sessions.set(id, s)
    return s
  }

  /** Gives back one reference; the session, taken out of the table, when it was the last (for the caller to free). */
  release(id: string): Promise<S> | undefined {
    const left = (this.#refs.get(id) ?? 1) - 1
    if (left > 0) {
      this.#refs.set(id, left)
      return undefined
    }
    this.#refs.delete(id)
    const s = this.#sessions.get(id)
    this.#sessions.delete(id)
    return s
  }

  /** Every session, the table emptied. */
  clear(): Promise<S>[] {
    const all = [...this.#sessions.values()]
    this.#sessions.clear()
    this.#refs.clear()
    return all
  }
}
