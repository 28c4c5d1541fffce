// Named fault points for tests, armed by SEEDFLOW_FAULT (read once, on first use). Unset, every hook returns at
// once: one array-length check. A fault fires at most once per process, then stays disarmed, so a throwing fault
// fails one attempt and the retry runs clean.
//
//   SEEDFLOW_FAULT=<site>:<point>[:<filter>][:kill|throw][,<more>]
//
//   <site> a phase (rollout, update, ...): <point> mid-work (inside the phase body, right after its first output
//          is written to the store: the work is partly stored, its manifest is not) or after-manifest (the
//          manifest is written, the activity has not returned); <filter> a shard number.
//   store: <point> before-put, after-put (every write: put, putStream, putIfAbsent) or mid-multipart (a streamed
//          multipart upload, once a part has gone out and more remain); <filter> a substring of the key.
//   kill (the default) SIGKILLs the process; throw throws a FaultInjected error there.
//
// Nothing in store/ or activities/ calls these: a worker's composition root (cli/worker-command.ts, and
// cli/run-command.ts for the worker of `seedflow run`) wraps its store in withStoreFaults, gives the S3 store
// watchMultipartUpload as its onMultipartUpload, and passes phaseFaultHooks as the phase wrapper's hooks.
import { AsyncLocalStorage } from 'node:async_hooks'
import type { Readable } from 'node:stream'
import type { PhaseHooks } from '../activities/phase.ts'
import type {
  ArtifactStore,
  CreateResult,
  ListOptions,
  ListPage,
  ObjectInfo,
  StoreIdentity,
} from '../store/artifact-store.ts'
import { assertValidKey } from '../store/key-check.ts'
import { PHASES } from '../store/keys.ts'
import type { MultipartWatcher } from '../store/s3-store.ts'

export const FAULT_VARIABLE = 'SEEDFLOW_FAULT'

const PHASE_POINTS = ['mid-work', 'after-manifest'] as const
const STORE_POINTS = ['before-put', 'after-put', 'mid-multipart'] as const
export type PhasePoint = (typeof PHASE_POINTS)[number]
export type StorePoint = (typeof STORE_POINTS)[number]

export interface Fault {
  site: string
  point: string
  /** Phases: the shard; store: a substring of the key. Absent: any. */
  filter?: string
  action: 'kill' | 'throw'
  /** The original entry, for messages. */
  spec: string
}

export class FaultInjected extends Error {
  override name = 'FaultInjected'
}

/** A SEEDFLOW_FAULT value that names no fault point; the message lists every bad entry. */
export class InvalidFaultSpec extends Error {
  override name = 'InvalidFaultSpec'
}

/** Parses a SEEDFLOW_FAULT value; throws InvalidFaultSpec naming every bad entry. */
export function parseFaults(value: string): Fault[] {
  const faults: Fault[] = []
  const problems: string[] = []
  for (const spec of value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const parts = spec.split(':')
    const action = parts.at(-1) === 'kill' || parts.at(-1) === 'throw' ? (parts.pop() as Fault['action']) : 'kill'
    const [site = '', point = '', filter, ...rest] = parts
    const phase = (PHASES as readonly string[]).includes(site)
    const points: readonly string[] = site === 'store' ? STORE_POINTS : phase ? PHASE_POINTS : []
    if (points.length === 0) problems.push(`${spec}: unknown site '${site}' (store or a phase: ${PHASES.join(', ')})`)
    else if (!points.includes(point)) problems.push(`${spec}: unknown point '${point}' (${points.join(', ')})`)
    else if (rest.length > 0) problems.push(`${spec}: too many fields`)
    else if (phase && filter !== undefined && !/^\d+$/.test(filter))
      problems.push(`${spec}: the shard must be a non-negative integer, got '${filter}'`)
    else faults.push({ site, point, action, spec, ...(filter === undefined || filter === '' ? {} : { filter }) })
  }
  if (problems.length > 0) throw new InvalidFaultSpec(`${FAULT_VARIABLE} is invalid:\n  ${problems.join('\n  ')}`)
  return faults
}

/**
 * SEEDFLOW_FAULT of `env` checked before anything starts (a command's entry point): InvalidFaultSpec naming every
 * bad entry, where the hooks would only parse it at their first use, inside a running phase.
 */
export function validateFaultVariable(env: NodeJS.ProcessEnv = process.env): readonly Fault[] {
  return parseFaults(env[FAULT_VARIABLE] ?? '')
}

let armed: Fault[] | undefined

/** The faults SEEDFLOW_FAULT arms in this process (parsed on the first call; a bad value throws). */
export function armedFaults(): readonly Fault[] {
  armed ??= parseFaults(process.env[FAULT_VARIABLE] ?? '')
  return armed
}

/** Re-arms from `value` (tests in one process); undefined reads SEEDFLOW_FAULT again. */
export function rearmFaults(value?: string): void {
  armed = value === undefined ? undefined : parseFaults(value)
}

function fire(fault: Fault, where: string): void {
  armed = armedFaults().filter((f) => f !== fault)
  const message = `fault injected: ${fault.spec} at ${where}`
  if (fault.action === 'throw') throw new FaultInjected(message)
  process.stderr.write(`seedflow: ${message} (pid ${process.pid}, SIGKILL)\n`)
  process.kill(process.pid, 'SIGKILL')
}

function take(site: string, point: string, matches: (filter: string) => boolean): Fault | undefined {
  return armedFaults().find(
    (f) => f.site === site && f.point === point && (f.filter === undefined || matches(f.filter)),
  )
}

interface PhasePlace {
  phase: string
  shard: number
  description: string
}

const currentPhase = new AsyncLocalStorage<PhasePlace>()

/** A phase fault point: fires an armed `<phase>:<point>[:<shard>]`. */
export function phaseFault(point: PhasePoint, place: PhasePlace): void {
  if (armedFaults().length === 0) return
  const fault = take(place.phase, point, (shard) => Number(shard) === place.shard)
  if (fault) fire(fault, place.description)
}

/** Runs a phase body so that its store writes can fire `<phase>:mid-work`. */
export function inPhaseBody<T>(place: PhasePlace, body: () => Promise<T>): Promise<T> {
  if (armedFaults().length === 0) return body()
  return currentPhase.run(place, body)
}

/** A store fault point; `after-put` also fires the running phase body's mid-work fault. */
export function storeFault(point: Exclude<StorePoint, 'mid-multipart'>, key: string): void {
  if (armedFaults().length === 0) return
  const fault = take('store', point, (part) => key.includes(part))
  if (fault) fire(fault, `${point} ${key}`)
  const place = point === 'after-put' ? currentPhase.getStore() : undefined
  if (place) phaseFault('mid-work', { ...place, description: `${place.description}, after writing ${key}` })
}

/** True when any fault is armed: callers skip even registering a hook otherwise. */
export function faultsArmed(): boolean {
  return armedFaults().length > 0
}

/**
 * `store:mid-multipart` for a multipart upload's progress event: fires once a part has gone out and more remain
 * (a single-request upload reports loaded = total and never fires). `throw` aborts the upload through `abort`.
 */
export function multipartFault(key: string, progress: { loaded?: number; total?: number }, abort: () => unknown): void {
  if (progress.loaded === undefined || progress.loaded === 0 || progress.loaded === progress.total) return
  const fault = take('store', 'mid-multipart', (part) => key.includes(part))
  if (!fault) return
  try {
    fire(fault, `mid-multipart ${key} after ${progress.loaded} bytes`)
  } catch {
    void abort()
  }
}

/** `store:mid-multipart` through the S3 store's onMultipartUpload; watches no upload when nothing is armed. */
export const watchMultipartUpload: MultipartWatcher = (key, abort) =>
  faultsArmed() ? (progress) => multipartFault(key, progress, abort) : undefined

/** The phase fault points as the phase wrapper's hooks (activities/phase.ts): mid-work and after-manifest. */
export const phaseFaultHooks: PhaseHooks = {
  around: inPhaseBody,
  afterManifest: (place) => phaseFault('after-manifest', place),
}

/**
 * `store` with the store fault points around its writes: before-put once the key is checked, after-put once the
 * write returned (for putIfAbsent, only when it created the object), which also fires a running phase body's
 * mid-work. Reads, lists and deletes pass straight through.
 */
export function withStoreFaults(store: ArtifactStore): ArtifactStore {
  return new FaultyStore(store)
}

class FaultyStore implements ArtifactStore {
  readonly #store: ArtifactStore

  constructor(store: ArtifactStore) {
    this.#store = store
  }

  get location(): string {
    return this.#store.location
  }

  async put(key: string, data: Uint8Array): Promise<ObjectInfo> {
    beforePut(key)
    const info = await this.#store.put(key, data)
    storeFault('after-put', key)
    return info
  }

  async putStream(key: string, data: Readable): Promise<ObjectInfo> {
    beforePut(key)
    const info = await this.#store.putStream(key, data)
    storeFault('after-put', key)
    return info
  }

  async putIfAbsent(key: string, data: Uint8Array): Promise<CreateResult> {
    beforePut(key)
    const result = await this.#store.putIfAbsent(key, data)
    if (result.created) storeFault('after-put', key)
    return result
  }

  get(key: string): Promise<Buffer> {
    return this.#store.get(key)
  }

  getStream(key: string): Promise<Readable> {
    return this.#store.getStream(key)
  }

  head(key: string): Promise<ObjectInfo | undefined> {
    return this.#store.head(key)
  }

  list(prefix: string, options?: ListOptions): Promise<ListPage> {
    return this.#store.list(prefix, options)
  }

  delete(key: string): Promise<void> {
    return this.#store.delete(key)
  }

  identity(): Promise<StoreIdentity> {
    return this.#store.identity()
  }
}

/** A key the store would refuse is refused before the fault point, as the stores did (nothing fires for it). */
function beforePut(key: string): void {
  assertValidKey(key)
  storeFault('before-put', key)
}
