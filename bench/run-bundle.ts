// A run's stored objects as one file, so the shared start of a benchmark seed (its base and Stage 1 runs) can be
// restored into a fresh store instead of trained again: the pipeline then reuses every stored phase (same config,
// same inputs, same bytes). bench:learning keeps these files in a cache folder of the machine, outside the tree,
// and their checkpoints' sha256 in bench/results/learning-starts.json (bench/learning-starts.ts): training is
// bit-reproducible at one ORT thread on one machine, not across machines (ONNX Runtime's kernels follow the CPU's
// instruction set), so a start made elsewhere is checked, not trusted.
//
// The file is gzip'd JSON lines: a header, then one line per object (key, sha256, bytes, base64 data), sorted by
// key. Every object is checked against the store's recorded sha256 when bundled and against its own line when
// restored; restoring never overwrites: an object that exists with other bytes is an error, one that exists with
// the same bytes is kept.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { gunzipSync, gzipSync } from 'node:zlib'
import { type ArtifactStore, listAll } from '../store/artifact-store.ts'
import { sha256Hex as sha256 } from '../store/hash.ts'
import { keys } from '../store/keys.ts'

const FORMAT = 'seedflow-run-bundle'
const VERSION = 1

interface Header {
  format: typeof FORMAT
  version: typeof VERSION
  runId: string
  objects: number
  bytes: number
}

interface BundledObject {
  key: string
  sha256: string
  bytes: number
  data: string
}

export interface BundledEntry {
  key: string
  sha256: string
  data: Buffer
}

export interface BundleSummary {
  runId: string
  objects: number
  bytes: number
}

/** Writes every object of run `runId` into `file` (atomically: the file appears whole or not at all). */
export async function bundleRun(store: ArtifactStore, runId: string, file: string): Promise<BundleSummary> {
  const listed: string[] = []
  for await (const entry of listAll(store, keys.runPrefix(runId))) listed.push(entry.key)
  listed.sort()
  if (listed.length === 0) throw new Error(`run ${runId} has no objects in ${store.location}`)
  const lines: string[] = []
  let bytes = 0
  for (const key of listed) {
    const data = await store.get(key) // checks the recorded sha256
    const info = await store.head(key)
    const digest = sha256(data)
    if (info && info.sha256 !== digest) throw new Error(`${key} changed while it was bundled`)
    bytes += data.length
    lines.push(JSON.stringify({ key, sha256: digest, bytes: data.length, data: data.toString('base64') }))
  }
  const header: Header = { format: FORMAT, version: VERSION, runId, objects: listed.length, bytes }
  mkdirSync(dirname(file), { recursive: true })
  const partial = `${file}.partial-${process.pid}`
  writeFileSync(partial, gzipSync(`${[JSON.stringify(header), ...lines].join('\n')}\n`, { level: 9 }))
  renameSync(partial, file)
  return { runId, objects: listed.length, bytes }
}

/** The objects of the bundle in `file`, each checked against its recorded sha256 (a damaged file is refused whole). */
export function readBundle(file: string): { runId: string; bytes: number; objects: BundledEntry[] } {
  const lines = gunzipSync(readFileSync(file)).toString('utf8').split('\n').filter(Boolean)
  const header = JSON.parse(lines[0] ?? 'null') as Header | null
  if (header?.format !== FORMAT || header.version !== VERSION)
    throw new Error(`${file}: not a ${FORMAT} of version ${VERSION}`)
  if (lines.length - 1 !== header.objects)
    throw new Error(`${file}: the header names ${header.objects} objects, the file holds ${lines.length - 1}`)
  const prefix = keys.runPrefix(header.runId)
  const objects = lines.slice(1).map((line) => {
    const o = JSON.parse(line) as BundledObject
    if (!o.key.startsWith(prefix)) throw new Error(`${file}: ${o.key} is not an object of run ${header.runId}`)
    const data = Buffer.from(o.data, 'base64')
    if (data.length !== o.bytes || sha256(data) !== o.sha256)
      throw new Error(`${file}: ${o.key} does not match its recorded sha256 (the file is damaged)`)
    return { key: o.key, sha256: o.sha256, data }
  })
  return { runId: header.runId, bytes: header.bytes, objects }
}

/** Puts every object of the bundle in `file` into `store` that is not there yet; returns how many it wrote. */
export async function restoreRun(
  store: ArtifactStore,
  file: string,
): Promise<BundleSummary & { written: number; kept: number }> {
  // the whole file is checked before anything is written, so a damaged bundle leaves the store as it was
  const { runId, bytes, objects } = readBundle(file)
  let written = 0
  let kept = 0
  for (const o of objects) {
    const result = await store.putIfAbsent(o.key, o.data)
    if (result.created) written++
    else if (result.info.sha256 === o.sha256) kept++
    else
      throw new Error(
        `${o.key} exists in ${store.location} with other bytes (sha256 ${result.info.sha256.slice(0, 12)}, the bundle's ${o.sha256.slice(0, 12)}): a different run of the same id`,
      )
  }
  return { runId, objects: objects.length, bytes, written, kept }
}
