// Shape-inference helpers shared by the op definitions.
import type { DType } from '../dtype.ts'
import { ShapeError } from '../errors.ts'
import type { Value, ValueInfo } from '../ir.ts'
import {
  broadcastShapes,
  type Dim,
  formatShape,
  isUnknownDim,
  normalizeAxis,
  type Shape,
  unknownDim,
} from '../shape.ts'

export function sameDtype(opType: string, values: readonly Value[]): DType {
  const first = values[0]
  if (!first) throw new ShapeError(`${opType}: no inputs`)
  for (const v of values) {
    if (v.dtype !== first.dtype) {
      const list = values.map((u) => `${u.name}: ${u.dtype}${formatShape(u.shape)}`).join(', ')
      throw new ShapeError(`${opType}: inputs must share one dtype (${list})`)
    }
  }
  return first.dtype
}

export function broadcastAll(opType: string, values: readonly Value[]): Dim[] {
  let shape: Dim[] = []
  for (const v of values) shape = broadcastShapes(opType, shape, v.shape)
  return shape
}

/** Elements of a small integer input known at build time, as numbers; undefined when not all known. */
export function knownInts(v: Value | null | undefined): number[] | undefined {
  if (!v?.known) return undefined
  return v.known.every((d) => typeof d === 'number') ? (v.known as number[]) : undefined
}

/** The length of a 1-D value, which must be static (axes, shapes, pads). */
export function staticLength(opType: string, v: Value): number {
  const n = v.shape.length === 0 ? 1 : v.shape[0]
  if (typeof n !== 'number' || v.shape.length > 1) {
    throw new ShapeError(`${opType}: ${v.name} must be a 1-D tensor of static length, got ${formatShape(v.shape)}`)
  }
  return n
}

export function reduceShape(
  opType: string,
  shape: Shape,
  axes: readonly number[] | undefined,
  keepdims: boolean,
): Dim[] {
  const rank = shape.length
  const set = new Set((axes ?? shape.map((_, i) => i)).map((a) => normalizeAxis(opType, a, rank)))
  return shape.flatMap((d, i) => (set.has(i) ? (keepdims ? [1] : []) : [d]))
}

/** Length of a step-1 slice of a named dim, kept symbolic where possible (`T` sliced [1:] is `T-1`). */
export function sliceDim(d: Dim, start: number, end: number, step: number): Dim {
  const BIG = 2 ** 52
  if (typeof d === 'number') {
    if (step > 0) {
      const s = clamp(start < 0 ? start + d : start, 0, d)
      const e = clamp(end < 0 ? end + d : end, 0, d)
      return Math.max(0, Math.ceil((e - s) / step))
    }
    const s = clamp(start < 0 ? start + d : start, -1, d - 1)
    const e = clamp(end < 0 ? end + d : end, -1, d - 1)
    return Math.max(0, Math.ceil((e - s) / step))
  }
  if (step !== 1 || isUnknownDim(d)) return unknownDim()
  const toEnd = end >= BIG
  if (start >= 0 && toEnd) return subDim(d, start)
  if (start >= 0 && end < 0) return subDim(d, start - end)
  if (start < 0 && toEnd) return -start
  if (start < 0 && end < 0) return Math.max(0, end - start)
  if (start >= 0 && end >= 0) return Math.max(0, end - start)
  return unknownDim()
}

/** `d - k` for a named dim, folding `T-1` minus 2 into `T-3`. */
export function subDim(d: Dim, k: number): Dim {
  if (k === 0) return d
  if (typeof d === 'number') return d - k
  if (isUnknownDim(d)) return unknownDim()
  const m = /^(.*)-(\d+)$/.exec(d)
  return m ? `${m[1]}-${Number(m[2]) + k}` : `${d}-${k}`
}

function clamp(x: number, lo: number, hi: number): number {
  return Math.min(Math.max(x, lo), hi)
}

export function same(v: Value): ValueInfo[] {
  return [{ dtype: v.dtype, shape: v.shape }]
}
