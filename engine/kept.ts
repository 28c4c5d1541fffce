// What every engine does the same around a run: kept feeds by handle (the first `rows` of each along axis 0 when
// asked), the checks of a run's names (missing and unknown feeds, outputs kept in place or written), and the
// slices an output writes into a kept tensor. The local engine keeps arrays; the native engine
// (engine/native-engine.ts) keeps the same names and shapes on the JS side and the tensors in native memory.
import { EngineRuntimeError } from './errors.ts'
import type { KeptFeeds, KeptWrite, RunOptions } from './interface.ts'
import { formatShape } from './shape.ts'
import type { TensorData } from './tensor.ts'

/** A kept tensor as an engine tracks it: at least its shape. */
export type Shaped = Pick<TensorData, 'dtype' | 'dims'>

/**
 * The checks of a run's names, the same in every engine: every input fed once (given or kept), outputs kept in place
 * of a kept feed or written into a kept tensor among the fetches. Returns the fetches and what to keep of them.
 */
export function checkedRun(
  model: string,
  session: { readonly inputNames: readonly string[]; readonly outputNames: readonly string[] },
  given: Readonly<Record<string, unknown>>,
  feeds: Readonly<Record<string, unknown>>,
  options: RunOptions,
): {
  fetches: readonly string[]
  inPlace: Readonly<Record<string, string>>
  writes: Readonly<Record<string, KeptWrite>>
} {
  const id = model.slice(0, 12)
  const missing = session.inputNames.filter((n) => !(n in feeds))
  const unknown = Object.keys(feeds).filter((n) => !session.inputNames.includes(n))
  if (missing.length > 0 || unknown.length > 0)
    throw new EngineRuntimeError(
      `model ${id}: missing feeds [${missing.join(', ')}], unknown feeds [${unknown.join(', ')}]`,
    )
  const fetches = options.fetches ?? session.outputNames
  const inPlace = options.inPlace ?? {}
  const writes = options.writes ?? {}
  const stray = [...Object.keys(inPlace), ...Object.keys(writes)].filter((n) => !fetches.includes(n))
  if (stray.length > 0)
    throw new EngineRuntimeError(`model ${id}: outputs [${stray.join(', ')}] to keep are not among the fetches`)
  for (const [name, feed] of Object.entries(inPlace))
    if (!(feed in feeds) || feed in given)
      throw new EngineRuntimeError(`model ${id}: output ${name} in place of ${feed}, not a kept feed`)
  return { fetches, inPlace, writes }
}

/** The feeds with the kept tensors the handles name (`rows` makes the view of the first rows). */
export function withKept<T extends Shaped>(
  feeds: Readonly<Record<string, T>>,
  handles: KeptFeeds | readonly KeptFeeds[] | undefined,
  kept: ReadonlyMap<number, Readonly<Record<string, T>>>,
  rows: (t: T, rows: number, name: string) => T,
): Record<string, T> {
  if (!handles) return { ...feeds }
  const all: Record<string, T> = {}
  for (const handle of 'id' in handles ? [handles] : handles) {
    const held = heldBy(kept, handle)
    for (const [name, t] of Object.entries(held)) {
      if (name in all) throw new EngineRuntimeError(`kept feeds [${name}] are named by two handles`)
      all[name] = handle.rows === undefined ? t : rows(t, handle.rows, name)
    }
  }
  const both = Object.keys(feeds).filter((n) => n in all)
  if (both.length > 0) throw new EngineRuntimeError(`feeds [${both.join(', ')}] are both kept and fed`)
  return { ...all, ...feeds }
}

export function heldBy<T>(
  kept: ReadonlyMap<number, Readonly<Record<string, T>>>,
  handle: KeptFeeds,
): Readonly<Record<string, T>> {
  const held = kept.get(handle.id)
  if (!held)
    throw new EngineRuntimeError(`kept feeds ${handle.id} are not in this engine (forgotten, or kept elsewhere)`)
  return held
}

export function keptTensor<T>(kept: ReadonlyMap<number, Readonly<Record<string, T>>>, write: KeptWrite): T {
  const t = heldBy(kept, write.kept)[write.name]
  if (!t) throw new EngineRuntimeError(`kept feeds ${write.kept.id} hold no tensor ${write.name}`)
  return t
}

/** Throws unless `rows` is a count of entries along axis 0 that `dims` has. */
export function checkRows(dims: readonly number[], rows: number, name: string): void {
  const all = dims[0] ?? 0
  if (!Number.isInteger(rows) || rows < 1 || rows > all)
    throw new EngineRuntimeError(`kept tensor ${name}: ${rows} rows asked, it has ${all}`)
}

/** A view of the first `rows` entries of `t` along axis 0. */
export function firstRows(t: TensorData, rows: number, name: string): TensorData {
  checkRows(t.dims, rows, name)
  const n = t.dims.slice(1).reduce((a, b) => a * b, rows)
  return { dtype: t.dtype, dims: [rows, ...t.dims.slice(1)], data: t.data.subarray(0, n) as TensorData['data'] }
}

/** Copies slices of `source` (an output) into `target` (a kept tensor), as `write` says (see `KeptWrite`). */
export function writeSlices(source: TensorData, target: TensorData, write: KeptWrite, output: string): void {
  const { axis } = write
  const what = `output ${output} into kept tensor ${write.name}`
  const rank = target.dims.length
  if (source.dtype !== target.dtype || source.dims.length !== rank)
    throw new EngineRuntimeError(
      `${what}: ${source.dtype}${formatShape(source.dims)} into ${target.dtype}${formatShape(target.dims)}`,
    )
  if (!Number.isInteger(axis) || axis < 1 || axis >= rank)
    throw new EngineRuntimeError(`${what}: axis ${axis} is not one of 1..${rank - 1}`)
  if (target.dims.some((d, i) => i !== 0 && i !== axis && d !== source.dims[i]))
    throw new EngineRuntimeError(
      `${what}: ${formatShape(source.dims)} and ${formatShape(target.dims)} differ off axes 0 and ${axis}`,
    )
  const outer = target.dims.slice(1, axis).reduce((a, b) => a * b, 1)
  const inner = target.dims.slice(axis + 1).reduce((a, b) => a * b, 1)
  const span = source.dims[axis] as number
  const room = target.dims[axis] as number
  const chunk = span * inner
  const src = source.data as Float32Array
  const dst = target.data as Float32Array
  for (const { from, row, at } of write.slices) {
    if (!(from >= 0 && from < (source.dims[0] as number) && row >= 0 && row < (target.dims[0] as number)))
      throw new EngineRuntimeError(`${what}: slice ${from} → row ${row} is out of range`)
    if (!(Number.isInteger(at) && at >= 0 && at + span <= room))
      throw new EngineRuntimeError(`${what}: ${span} at ${at} exceed the ${room} along axis ${axis}`)
    for (let o = 0; o < outer; o++) {
      const s = (from * outer + o) * chunk
      const d = ((row * outer + o) * room + at) * inner
      if (chunk === 1) dst[d] = src[s] as number
      else dst.set(src.subarray(s, s + chunk), d)
    }
  }
}
