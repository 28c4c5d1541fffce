// TensorBoard event files of scalar metrics: the `brain.Event:2` file-version event, then one Event per point in
// the order given, each framed as a TFRecord. Deterministic: the same points and options give the same bytes.
// Version 2 files are exempt from TensorBoard's purge of out-of-order steps (it purges only on a SessionLog.START
// event, which we never write), so points may come in any order.
import { mkdir, writeFile } from 'node:fs/promises'
import { hostname as osHostname } from 'node:os'
import { join } from 'node:path'
import { encodeFileVersionEvent, encodeScalarEvent, type ScalarPoint } from './event.ts'
import { frameRecords } from './tfrecord.ts'

export type { ScalarPoint } from './event.ts'

export interface EventFileOptions {
  /** Wall time (seconds) of the file-version event; its integer part names the file. */
  fileVersionWallTime: number
}

export interface WriteEventFileOptions extends EventFileOptions {
  /** Defaults to os.hostname(), as TensorBoard's writers use. */
  hostname?: string
}

/** A point TensorBoard cannot hold: a non-finite value or wall time, a bad step, an empty tag. */
export class ScalarPointError extends RangeError {
  override name = 'ScalarPointError'
}

function checkPoint(p: ScalarPoint, index: number): void {
  const at = `scalar ${index} (tag ${JSON.stringify(p.tag)}, step ${p.step})`
  if (typeof p.tag !== 'string' || p.tag.length === 0) throw new ScalarPointError(`${at}: empty tag`)
  if (!Number.isSafeInteger(p.step) || p.step < 0) {
    throw new ScalarPointError(`${at}: step must be a non-negative integer`)
  }
  if (!Number.isFinite(p.wallTime)) throw new ScalarPointError(`${at}: wall time ${p.wallTime} is not finite`)
  if (!Number.isFinite(p.value)) throw new ScalarPointError(`${at}: value ${p.value} is not finite`)
  // simple_value is a float32: a finite float64 beyond its range would be stored as ±Infinity
  if (!Number.isFinite(Math.fround(p.value))) {
    throw new ScalarPointError(`${at}: value ${p.value} overflows float32 (TensorBoard's simple_value)`)
  }
}

/** The whole event file as bytes; throws ScalarPointError (a RangeError) naming the first bad point. */
export function encodeEventFile(scalars: readonly ScalarPoint[], opts: EventFileOptions): Uint8Array {
  if (!Number.isFinite(opts.fileVersionWallTime)) {
    throw new RangeError(`fileVersionWallTime ${opts.fileVersionWallTime} is not finite`)
  }
  scalars.forEach(checkPoint)
  return frameRecords([encodeFileVersionEvent(opts.fileVersionWallTime), ...scalars.map(encodeScalarEvent)])
}

/** `events.out.tfevents.<seconds, 10 digits>.<hostname>`: TensorBoard reads any file whose name has "tfevents". */
export function eventFileName(fileVersionWallTime: number, hostname: string = osHostname()): string {
  const seconds = Math.trunc(fileVersionWallTime)
  if (seconds < 0) throw new RangeError(`fileVersionWallTime ${fileVersionWallTime} is before 1970`)
  if (hostname.length === 0 || hostname.includes('/')) throw new RangeError(`bad hostname ${JSON.stringify(hostname)}`)
  return `events.out.tfevents.${String(seconds).padStart(10, '0')}.${hostname}`
}

/** Writes the event file into `dir` (created if missing, an existing file of that name replaced); returns its path. */
export async function writeEventFile(
  dir: string,
  scalars: readonly ScalarPoint[],
  opts: WriteEventFileOptions,
): Promise<string> {
  const bytes = encodeEventFile(scalars, opts)
  const path = join(dir, eventFileName(opts.fileVersionWallTime, opts.hostname))
  await mkdir(dir, { recursive: true })
  await writeFile(path, bytes)
  return path
}
