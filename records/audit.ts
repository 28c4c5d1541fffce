// `seedflow audit` as a library (no Temporal server needed): walks what a run left in its store, run.json →
// the run-level phase manifests (base, Stage 1, their evaluations) → each iteration's phase manifests and its
// iteration manifest, re-hashes every artifact they record, and checks every lineage link: an iteration
// manifest's parent keys and a phase manifest's inputs (recorded by sha256) must each resolve to an artifact of
// the run. Artifacts that a retention record lists and that are gone are pruned, not broken. plan.json, run.json,
// the manifests, retention records and hyperparameter changes are checked as artifacts too (their store record is
// their only record). Damage never stops the walk: every damaged artifact is listed; only a failing store throws.
import { type ArtifactStore, listAll } from '../store/artifact-store.ts'
import { IntegrityError, StorePermissionError } from '../store/errors.ts'
import { rehashStored, sha256Hex } from '../store/hash.ts'
import { canonicalJson, getJson } from '../store/json.ts'
import { assertValidRunId, keys, PHASES } from '../store/keys.ts'
import type { Manifest } from '../store/manifest.ts'
import { type PrunedArtifact, readPrunedRecords } from '../store/pruned.ts'
import { type RecordedHyperparameterChange, readHyperparameterChanges } from './hyperparameters.ts'
import type { PhaseManifest } from './phase-manifest.ts'
import type { RunRecord } from './record-run.ts'

export class UnknownRunError extends Error {
  override name = 'UnknownRunError'
}

export interface AuditProblem {
  /** missing: gone without a retention record (plan.json: gone); hash / size: not what was recorded; link: a lineage link resolves to nothing; unreadable: not parseable or no recorded hash; config: run.json's hash is not its config's. */
  kind: 'missing' | 'hash' | 'size' | 'link' | 'unreadable' | 'config'
  key: string
  /** The manifest (or record) that references the artifact. */
  manifest: string
  expected?: string
  actual?: string
  message: string
}

export interface AuditReport {
  runId: string
  location: string
  configSha256: string
  seedflowVersions: string[]
  manifests: { phase: number; iteration: number; retention: number }
  /**
   * The run's current manifests: of each phase shard and iteration manifest, the newest attempt (what a rerun can
   * reuse; the older attempts are history), in walk order.
   */
  currentManifests: string[]
  /** Distinct blobs re-hashed, and their bytes. */
  artifacts: number
  bytes: number
  /** Lineage links checked (parent keys and hashed inputs). */
  links: number
  /** Recorded artifacts that retention removed on purpose. */
  pruned: PrunedArtifact[]
  hyperparameterChanges: RecordedHyperparameterChange[]
  /** Config hashes in phase manifests that neither run.json nor a hyperparameter change records. */
  unexplainedConfigHashes: string[]
  /** One problem per broken artifact or link, in walk order: the first is the first broken one. */
  broken: AuditProblem[]
}

/** `refused`: the store would not read the object (its own record is gone or damaged) but said what it hashes to. */
type Hashed = { sha256: string; bytes: number; refused?: string } | { missing: true } | { unreadable: string }

const PHASE_MANIFEST = /^(?:iterations\/(\d{4})\/)?([a-z0-9]+)\/(\d{4})(?:\.attempt-(\d+))?\.manifest\.json$/
const ITERATION_MANIFEST = /^iterations\/(\d{4})\/manifest(?:\.attempt-(\d+))?\.json$/
const RETENTION_RECORD = /^retention\/\d{4}\.json$/
/** Run-level phases in the order a run writes them. */
const STAGE_ORDER = ['fork', 'warmstart', 'import', 'annotate', 'sft', 'evaluate']

interface Located {
  key: string
  /** Sort key: walk order. */
  order: number[]
  kind: 'phase' | 'iteration' | 'retention'
}

function locate(runPrefix: string, key: string): Located | undefined {
  const rel = key.slice(runPrefix.length)
  const phase = PHASE_MANIFEST.exec(rel)
  if (phase) {
    const [, k, name, shard, attempt] = phase
    const rank =
      k === undefined ? STAGE_ORDER.indexOf(name as string) : (PHASES as readonly string[]).indexOf(name as string)
    return {
      key,
      kind: 'phase',
      order: [k === undefined ? -1 : Number(k), 0, rank, Number(shard), Number(attempt ?? 0)],
    }
  }
  const iteration = ITERATION_MANIFEST.exec(rel)
  if (iteration) return { key, kind: 'iteration', order: [Number(iteration[1]), 1, 0, 0, Number(iteration[2] ?? 0)] }
  if (RETENTION_RECORD.test(rel)) return { key, kind: 'retention', order: [Number.MAX_SAFE_INTEGER, 0, 0, 0, 0] }
  return undefined
}

/** Of each phase shard and iteration manifest, the key of its newest attempt (the attempt is `order`'s last). */
function newestAttempts(located: readonly Located[]): string[] {
  const newest = new Map<string, Located>()
  for (const l of located) {
    if (l.kind === 'retention') continue
    const family = l.key.replace(/\.attempt-\d+(?=\.)/, '') // the first attempt's key
    const seen = newest.get(family)
    if (!seen || (seen.order.at(-1) as number) < (l.order.at(-1) as number)) newest.set(family, l)
  }
  return [...newest.values()].sort(compareOrder).map((l) => l.key)
}

function compareOrder(a: Located, b: Located): number {
  for (let i = 0; i < a.order.length; i++) {
    const d = (a.order[i] as number) - (b.order[i] as number)
    if (d !== 0) return d
  }
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0
}

/** Re-hashes one blob from its bytes (streamed), whatever the store's own record says. */
async function rehash(store: ArtifactStore, key: string): Promise<Hashed> {
  try {
    return await rehashOnce(store, key)
  } catch (error) {
    if (error instanceof StorePermissionError) return { unreadable: error.message } // this file, not the store
    throw error
  }
}

async function rehashOnce(store: ArtifactStore, key: string): Promise<Hashed> {
  if (!(await store.head(key).catch((e) => (e instanceof IntegrityError ? true : Promise.reject(e))))) {
    return { missing: true }
  }
  const read = await rehashStored(store, key)
  if ('missing' in read) return read
  if (read.refused === undefined || read.bytes > 0) return { sha256: read.sha256 as string, bytes: read.bytes }
  // refused before the first byte (no recorded hash at all): the error carries the actual hash when the backend
  // computed it
  if (read.sha256 === undefined) return { unreadable: read.refused.message }
  return { sha256: read.sha256, bytes: -1, refused: read.refused.message }
}

export async function auditRun(store: ArtifactStore, runId: string): Promise<AuditReport> {
  assertValidRunId(runId)
  const runKey = keys.runRecord(runId)
  if (!(await store.head(runKey).catch((e) => (e instanceof IntegrityError ? true : Promise.reject(e))))) {
    throw new UnknownRunError(`unknown run ${runId}: no ${runKey} in ${store.location}`)
  }
  const runPrefix = keys.runPrefix(runId)
  const present = new Set<string>()
  const located: Located[] = []
  for await (const { key } of listAll(store, runPrefix)) {
    present.add(key)
    const l = locate(runPrefix, key)
    if (l) located.push(l)
  }
  located.sort(compareOrder)

  // a damaged retention record is reported where the walk reaches it (with the other records), not thrown here
  const { pruned, unreadable: unreadableRecords } = await readPrunedRecords(store, runId)
  const mayBePruned =
    unreadableRecords.length === 0
      ? ''
      : ` (or pruned: ${unreadableRecords.map((r) => r.key).join(', ')} cannot be read, and may list it)`
  const broken: AuditProblem[] = []
  const brokenKeys = new Set<string>()
  const problem = (p: AuditProblem) => {
    if (brokenKeys.has(p.key)) return
    brokenKeys.add(p.key)
    broken.push(p)
  }

  const hashed = new Map<string, Hashed>()
  let bytes = 0
  const hashOf = async (key: string): Promise<Hashed> => {
    let h = hashed.get(key)
    if (!h) {
      h = await rehash(store, key)
      hashed.set(key, h)
      if ('bytes' in h && h.bytes > 0) bytes += h.bytes
    }
    return h
  }
  const prunedSeen = new Map<string, PrunedArtifact>()

  const hashProblem = (key: string, manifest: string, expected: string, actual: string, message: string) =>
    problem({ kind: 'hash', key, manifest, expected, actual, message })

  /** Checks one recorded artifact against what `manifest` records for it. */
  const checkArtifact = async (key: string, expected: { sha256: string; bytes: number }, manifest: string) => {
    const h = await hashOf(key)
    if ('missing' in h) {
      const p = pruned.get(key)
      if (!p)
        return problem({
          kind: 'missing',
          key,
          manifest,
          expected: expected.sha256,
          message: `${key} is missing${mayBePruned}`,
        })
      if (p.sha256 !== expected.sha256) {
        const message = `${key} was pruned as sha256 ${p.sha256} (${p.record}), but ${manifest} records ${expected.sha256}`
        return hashProblem(key, manifest, expected.sha256, p.sha256, message)
      }
      prunedSeen.set(key, p)
      return
    }
    if ('unreadable' in h) return problem({ kind: 'unreadable', key, manifest, message: h.unreadable })
    if (h.sha256 !== expected.sha256) {
      const message = `${key}: ${manifest} records sha256 ${expected.sha256}, the stored bytes hash to ${h.sha256}`
      return hashProblem(key, manifest, expected.sha256, h.sha256, message)
    }
    if (h.refused !== undefined) {
      // the bytes are the recorded ones, but every reader of the store fails on them: damaged all the same
      const message = `${key}: the bytes are the ones ${manifest} records, but the store refuses to read them: ${h.refused}`
      return problem({ kind: 'unreadable', key, manifest, expected: expected.sha256, actual: h.sha256, message })
    }
    if (h.bytes >= 0 && h.bytes !== expected.bytes) {
      const message = `${key}: ${manifest} records ${expected.bytes} bytes, the store holds ${h.bytes}`
      problem({ kind: 'size', key, manifest, message })
    }
  }

  // run.json: readable, and its hash is its config's
  let record: RunRecord | undefined
  const runHash = await hashOf(runKey)
  try {
    record = JSON.parse((await store.get(runKey)).toString('utf8')) as RunRecord
    const actual = sha256Hex(Buffer.from(canonicalJson(record.config)))
    if (actual !== record.configSha256)
      problem({
        kind: 'config',
        key: runKey,
        manifest: runKey,
        expected: record.configSha256,
        actual,
        message: `${runKey}: records config sha256 ${record.configSha256}, its config hashes to ${actual}`,
      })
  } catch (error) {
    const actual = 'sha256' in runHash ? runHash.sha256 : undefined
    problem({
      kind: 'unreadable',
      key: runKey,
      manifest: runKey,
      ...(actual ? { actual } : {}),
      message: `${runKey}: ${(error as Error).message}`,
    })
  }

  await checkPlan(store, runId, await hashOf(keys.runPlan(runId)), problem)
  const { changes, unreadable: unreadableChanges } = await readHyperparameterChanges(store, runId)
  for (const { key, error } of unreadableChanges) {
    const { expected, actual } = error instanceof IntegrityError ? error : { expected: undefined, actual: undefined }
    problem({
      kind: 'unreadable',
      key,
      manifest: key,
      ...(expected ? { expected } : {}),
      ...(actual ? { actual } : {}),
      message: `${key}: ${error.message}`,
    })
  }

  // every manifest, read once (its own bytes checked by the store); lineage needs all of them before the walk
  const parsed = new Map<string, PhaseManifest | Manifest | Error>()
  for (const l of located) {
    try {
      parsed.set(l.key, JSON.parse((await store.get(l.key)).toString('utf8')) as PhaseManifest | Manifest)
    } catch (error) {
      parsed.set(l.key, error as Error)
    }
  }
  const recordedKeys = new Set<string>([runKey, ...located.map((l) => l.key)])
  const knownShas = new Set<string>()
  for (const l of located) {
    const h = hashed.get(l.key) ?? (await hashOf(l.key))
    if ('sha256' in h) knownShas.add(h.sha256)
    const m = parsed.get(l.key)
    if (!m || m instanceof Error || l.kind === 'retention') continue
    if (l.kind === 'phase') {
      for (const o of Object.values((m as PhaseManifest).outputs ?? {})) {
        recordedKeys.add(o.key)
        knownShas.add(o.sha256)
      }
    } else {
      for (const [key, entry] of Object.entries((m as Manifest).artifacts ?? {})) {
        recordedKeys.add(key)
        knownShas.add(entry.sha256)
      }
    }
  }

  let links = 0
  const configHashes = new Set<string>()
  const versions = new Set<string>(record?.seedflowVersion ? [record.seedflowVersion] : [])
  const counts = { phase: 0, iteration: 0, retention: 0 }
  for (const l of located) {
    counts[l.kind]++
    const m = parsed.get(l.key)
    if (m === undefined || m instanceof Error) {
      const h = await hashOf(l.key)
      problem({
        kind: 'unreadable',
        key: l.key,
        manifest: l.key,
        ...('sha256' in h ? { actual: h.sha256 } : {}),
        message: `${l.key}: ${m?.message ?? 'unreadable'}`,
      })
      continue
    }
    if (l.kind === 'retention') continue
    if (m.seedflowVersion) versions.add(m.seedflowVersion)
    if (m.configSha256) configHashes.add(m.configSha256)
    if (l.kind === 'phase') {
      const pm = m as PhaseManifest
      for (const output of Object.values(pm.outputs ?? {})) await checkArtifact(output.key, output, l.key)
      for (const [name, sha] of Object.entries(pm.inputs ?? {})) {
        if (name.startsWith('folder/')) continue // an imported model's source folder, outside the store
        links++
        if (!knownShas.has(sha))
          problem({
            kind: 'link',
            key: l.key,
            manifest: l.key,
            expected: sha,
            message: `${l.key}: input ${name} has sha256 ${sha}, which no artifact of the run has`,
          })
      }
    } else {
      const im = m as Manifest
      for (const [key, entry] of Object.entries(im.artifacts ?? {})) {
        await checkArtifact(key, entry, l.key)
        for (const parent of entry.parents ?? []) {
          links++
          if (!recordedKeys.has(parent) && !present.has(parent) && !pruned.has(parent))
            problem({
              kind: 'link',
              key,
              manifest: l.key,
              message: `${key}: parent ${parent} (in ${l.key}) is no artifact of the run`,
            })
        }
      }
    }
  }

  const explained = new Set([record?.configSha256, ...changes.map((c) => c.configSha256)])
  return {
    runId,
    location: store.location,
    configSha256: record?.configSha256 ?? '',
    seedflowVersions: [...versions].sort(),
    manifests: counts,
    currentManifests: newestAttempts(located),
    artifacts: [...hashed.values()].filter((h) => 'sha256' in h).length,
    bytes,
    links,
    pruned: [...prunedSeen.values()].sort((a, b) => (a.key < b.key ? -1 : 1)),
    hyperparameterChanges: changes,
    unexplainedConfigHashes: [...configHashes].filter((h) => !explained.has(h)).sort(),
    broken,
  }
}

/** plan.json: present, its bytes what the store recorded, a JSON run plan. */
async function checkPlan(
  store: ArtifactStore,
  runId: string,
  hashed: Hashed,
  problem: (p: AuditProblem) => void,
): Promise<void> {
  const key = keys.runPlan(runId)
  const at = { key, manifest: key }
  if ('missing' in hashed) {
    problem({ kind: 'missing', ...at, message: `${key} is missing (the run's plan: rerun the run to write it again)` })
    return
  }
  if ('unreadable' in hashed) {
    problem({ kind: 'unreadable', ...at, message: `${key}: ${hashed.unreadable}` })
    return
  }
  let plan: unknown
  try {
    plan = await getJson(store, key)
  } catch (error) {
    if (error instanceof IntegrityError && error.expected !== undefined) {
      const { expected, actual } = error
      problem({ kind: 'hash', ...at, expected, ...(actual ? { actual } : {}), message: error.message })
    } else {
      problem({ kind: 'unreadable', ...at, actual: hashed.sha256, message: `${key}: ${(error as Error).message}` })
    }
    return
  }
  const p = plan as { iterations?: unknown; shards?: unknown } | null
  const whole = (n: unknown) => typeof n === 'number' && Number.isInteger(n) && n >= 0
  if (p === null || typeof p !== 'object' || !whole(p.iterations) || !whole(p.shards) || p.shards === 0) {
    const message = `${key}: not a run plan (no whole numbers of iterations and shards)`
    problem({ kind: 'unreadable', ...at, actual: hashed.sha256, message })
  }
}
