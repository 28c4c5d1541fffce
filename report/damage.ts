// Artifacts a report could not read: bytes that no longer hash to their recorded sha256, a file that is not the
// JSON, gzip or rescore format it should be, a listed object that vanished. The report leaves out what they hold,
// names each on the page and goes on, so one bad file never costs the whole report. Anything else (the store
// unreachable, access refused, a bug) is no damage of the run and still throws.
import { RescoreFormatError } from '../records/rescore-format.ts'
import { isDamagedObject } from '../store/errors.ts'
import { html, type Markup } from './html.ts'

export interface DamagedArtifact {
  key: string
  /** The error's name and message: what was wrong with it. */
  reason: string
}

/** A damaged stored object (the store's isDamagedObject), or a rescore file that is not the rescore format. */
export function isDamage(error: unknown): error is Error {
  return isDamagedObject(error) || error instanceof RescoreFormatError
}

/** A reader that needs every artifact (an export) met damaged ones: names each and why. */
export class DamagedRunError extends Error {
  override name = 'DamagedRunError'
  constructor(
    readonly runId: string,
    readonly damaged: readonly DamagedArtifact[],
  ) {
    super(
      `run ${runId}: ${damaged.length} artifact${damaged.length === 1 ? '' : 's'} cannot be read: ` +
        `${damaged.map((d) => `${d.key} (${d.reason})`).join('; ')}; check with npx seedflow audit ${runId}`,
    )
  }
}

/** The damaged artifacts met while reading, each key once, in the order met. */
export class DamageLog {
  readonly #items = new Map<string, DamagedArtifact>()

  /** `read()`'s value, or undefined when it failed on damage (noted under `key`, or the key the error names). */
  async read<T>(key: string, read: () => Promise<T>): Promise<T | undefined> {
    try {
      return await read()
    } catch (error) {
      if (!isDamage(error)) throw error
      this.note(key, error)
      return undefined
    }
  }

  note(key: string, error: Error): void {
    const named = (error as { key?: unknown }).key
    const at = typeof named === 'string' ? named : key
    if (!this.#items.has(at)) this.#items.set(at, { key: at, reason: `${error.name}: ${error.message}` })
  }

  add(items: readonly DamagedArtifact[]): void {
    for (const item of items) if (!this.#items.has(item.key)) this.#items.set(item.key, item)
  }

  get items(): DamagedArtifact[] {
    return [...this.#items.values()]
  }
}

/** The notice a page shows of a run's damaged artifacts (nothing when there are none). */
export function damageNotice(runId: string, items: readonly DamagedArtifact[]): Markup {
  if (items.length === 0) return html``
  const n = items.length === 1 ? 'One artifact' : `${items.length} artifacts`
  return html`<section class="notice-bad" data-damaged="${runId}">
<strong>${n} of run ${runId} could not be read</strong>: what ${items.length === 1 ? 'it holds' : 'they hold'} is left out of the report, the rest is shown as usual.
<code>npx seedflow audit ${runId}</code> checks every artifact of the run.
<ul>${items.map((d) => html`<li><code>${d.key}</code>: ${d.reason}</li>`)}</ul></section>`
}
