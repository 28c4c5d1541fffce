// The learning benchmark's shared starts (a seed's base run and its Stage 1 run, bench/learning.ts) live outside
// the tracked tree: run bundles (bench/run-bundle.ts) in a cache folder of this machine, and in the tree only their
// record, bench/results/learning-starts.json: per start its run ids, the sha256 of every checkpoint file it holds,
// the command that regenerates it, and the history of earlier references. A start is made at one ORT thread,
// which is bit-reproducible on one machine (not across machines: ONNX Runtime's kernels follow the CPU's
// instruction set), so a regenerated or restored start is checked against the record and refused when a checkpoint
// differs, naming both hashes.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { cacheDir } from '../infra/models.ts'
import { type ArtifactStore, listAll } from '../store/artifact-store.ts'
import { keys } from '../store/keys.ts'

/** Where the record is committed. */
export const STARTS_RECORD = 'bench/results/learning-starts.json'

/** The folder of this machine's start bundles: `$SEEDFLOW_CACHE_DIR/learning-starts` (~/.cache/seedflow/…). */
export function startsCache(env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheDir(env), 'learning-starts')
}

/** Checkpoint files of a run by checkpoint (`base`, `sft`, …), each file's sha256 by name. */
export type Checkpoints = Record<string, Record<string, string>>

/** What a start was checked against once: its checkpoints and how they were made. */
export interface StartReference {
  /** How and where these bytes were made (command, threads, machine, date, commit). */
  madeBy: string
  configSha256: string
  checkpoints: Checkpoints
  /** The committed bundle these hashes were read from, when there was one (removed from the tree by issue 42). */
  bundle?: { file: string; sha256: string; bytes: number; objects: number; commit: string }
  /** What is known about this reference (e.g. that another machine does not reproduce it). */
  note?: string
}

/** A regeneration compared with the reference, kept whatever it found. */
export interface StartCheck {
  date: string
  machine: string
  how: string
  checkpoints: Checkpoints
  matches: boolean
  note: string
}

export interface StartRecord extends StartReference {
  env: string
  seed: number
  kind: 'base' | 'stage1'
  /** The start's own run id. */
  runId: string
  /** The run a Stage 1 start forks from (its base). */
  forkedFrom?: string
  /** ORT threads the start is made at (always 1: bit-reproducible on one machine). */
  ortThreads: 1
  /** The command that regenerates it from scratch and checks it against this record. */
  regenerate: string
  /**
   * The results file whose rows start from it (`--out`); absent in records from before the field, whose rows are in
   * bench/results/learning.json when the run id has the default prefix `lb-`.
   */
  results?: string
  /** Earlier references, newest first: a reference is replaced only by `--record-starts`, never silently. */
  history: StartReference[]
  /** Regenerations compared with a reference (on another machine, from a restored base …). */
  checks?: StartCheck[]
}

export interface StartsRecord {
  about: string
  starts: Record<string, StartRecord>
}

export class StartMismatchError extends Error {
  override name = 'StartMismatchError'
}

export class StartsRecordError extends Error {
  override name = 'StartsRecordError'
}

const ABOUT =
  'The learning benchmark shared starts (bench/learning.ts): per start the sha256 of each checkpoint file, checked ' +
  'whenever a start is regenerated or restored (docs/benchmarks.md section 3).'

export function readStartsRecord(file: string): StartsRecord {
  if (!existsSync(file)) return { about: ABOUT, starts: {} }
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<StartsRecord>
  if (typeof parsed.starts !== 'object' || parsed.starts === null)
    throw new StartsRecordError(`${file}: no "starts" object (not a learning-starts record)`)
  return { about: parsed.about ?? ABOUT, starts: parsed.starts }
}

/** Writes the record atomically, starts sorted by run id. */
export function writeStartsRecord(file: string, record: StartsRecord): void {
  const starts = Object.fromEntries(Object.entries(record.starts).sort(([a], [b]) => a.localeCompare(b)))
  mkdirSync(dirname(file), { recursive: true })
  const partial = `${file}.partial-${process.pid}`
  writeFileSync(partial, `${JSON.stringify({ about: record.about, starts }, null, 1)}\n`)
  renameSync(partial, file)
}

/**
 * The checkpoints among a run's objects: every `runs/<runId>/<name>/checkpoint/<file>` as `{ <name>: { <file>:
 * sha256 } }` (base, sft, …), sorted.
 */
export function checkpointsOf(runId: string, objects: Iterable<{ key: string; sha256: string }>): Checkpoints {
  const prefix = keys.runPrefix(runId)
  const found: [string, string, string][] = []
  for (const { key, sha256 } of objects) {
    if (!key.startsWith(prefix)) continue
    const match = /^([^/]+)\/checkpoint\/(.+)$/.exec(key.slice(prefix.length))
    if (match) found.push([match[1] as string, match[2] as string, sha256])
  }
  found.sort(([a, x], [b, y]) => a.localeCompare(b) || x.localeCompare(y))
  const out: Checkpoints = {}
  for (const [name, file, sha256] of found) {
    out[name] ??= {}
    out[name][file] = sha256
  }
  return out
}

/** The checkpoints run `runId` holds in `store` (each file's recorded sha256). */
export async function storedCheckpoints(store: ArtifactStore, runId: string): Promise<Checkpoints> {
  const objects: { key: string; sha256: string }[] = []
  for await (const entry of listAll(store, keys.runPrefix(runId))) {
    if (!entry.key.includes('/checkpoint/')) continue
    const info = await store.head(entry.key)
    if (info) objects.push({ key: entry.key, sha256: info.sha256 })
  }
  return checkpointsOf(runId, objects)
}

/** Each checkpoint file whose sha256 differs between `want` and `got` (or is in one only), both hashes named. */
export function checkpointDifferences(want: Checkpoints, got: Checkpoints, what: string): string[] {
  const problems: string[] = []
  for (const name of [...new Set([...Object.keys(want), ...Object.keys(got)])].sort()) {
    const w = want[name] ?? {}
    const g = got[name] ?? {}
    for (const file of [...new Set([...Object.keys(w), ...Object.keys(g)])].sort()) {
      if (w[file] === g[file]) continue
      problems.push(
        `${name}/checkpoint/${file}: sha256 ${g[file] ?? '(missing)'} ${what}, ${w[file] ?? '(not recorded)'} recorded`,
      )
    }
  }
  return problems
}

/**
 * Refuses a start whose checkpoints are not exactly the recorded ones: a file whose sha256 differs, one the
 * record names that is missing, one the record does not name. `what` says where the checkpoints come from
 * (regenerated, restored from a bundle …); the message names both hashes of every difference.
 */
export function checkStart(
  record: StartRecord,
  actual: { checkpoints: Checkpoints; configSha256: string },
  what: string,
): void {
  const problems = checkpointDifferences(record.checkpoints, actual.checkpoints, what)
  if (problems.length === 0) return
  const config =
    actual.configSha256 === record.configSha256
      ? `the same config ${record.configSha256}`
      : `config ${actual.configSha256}, recorded with config ${record.configSha256}`
  throw new StartMismatchError(
    `start ${record.runId} (${what}, ${config}) is not the one in ${STARTS_RECORD}:\n  ${problems.join('\n  ')}\n` +
      `A start is bit-reproducible at one ORT thread on one machine only; if the change is intended (new code, another machine), record the new one: ${record.regenerate} --record-starts`,
  )
}

/**
 * `record` with `start` as its reference for `start.runId`: added when the run has none, replaced only when
 * `replace` (the old reference goes to the front of the history, so nothing is silently lost).
 */
export function withStart(record: StartsRecord, start: StartRecord, replace: boolean): StartsRecord {
  const old = record.starts[start.runId]
  if (old && !replace)
    throw new StartsRecordError(`${start.runId} is recorded already; replace it with --record-starts`)
  const history = old
    ? [
        {
          madeBy: old.madeBy,
          configSha256: old.configSha256,
          checkpoints: old.checkpoints,
          ...(old.bundle ? { bundle: old.bundle } : {}),
          ...(old.note ? { note: old.note } : {}),
        },
        ...old.history,
      ]
    : []
  const checks = [...(start.checks ?? []), ...(old?.checks ?? [])]
  return {
    ...record,
    starts: { ...record.starts, [start.runId]: { ...start, history, ...(checks.length ? { checks } : {}) } },
  }
}
