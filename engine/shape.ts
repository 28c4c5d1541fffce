import { ShapeError } from './errors.ts'

/**
 * One dimension: a number, or a name for a size known only at run time (`'B'`, `'T'`, `'P+T'`).
 * A named dimension is never a broadcast 1: gradient rules rely on that to reduce broadcasts statically.
 * Names starting with `?` are unknown sizes made up by shape inference; they are written to ONNX without a name.
 */
export type Dim = number | string
export type Shape = readonly Dim[]

let unknownCounter = 0

/** A fresh unknown dimension: shape inference could not tell the size. */
export function unknownDim(): string {
  unknownCounter += 1
  return `?${unknownCounter}`
}

export function isUnknownDim(d: Dim): boolean {
  return typeof d === 'string' && d.startsWith('?')
}

export function formatShape(shape: Shape): string {
  return `[${shape.join(',')}]`
}

/** Resolves a possibly negative axis against `rank`; throws naming the op when out of range. */
export function normalizeAxis(op: string, axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis
  if (!Number.isInteger(a) || a < 0 || a >= rank)
    throw new ShapeError(`${op}: axis ${axis} out of range for rank ${rank}`)
  return a
}

/** Numpy-style broadcast of two shapes. Two different names are assumed equal (the first is kept). */
export function broadcastShapes(op: string, a: Shape, b: Shape): Dim[] {
  const rank = Math.max(a.length, b.length)
  const out: Dim[] = []
  for (let i = 0; i < rank; i++) {
    const da = a[a.length - rank + i] ?? 1
    const db = b[b.length - rank + i] ?? 1
    if (da === db || db === 1) out.push(da)
    else if (da === 1) out.push(db)
    else if (typeof da === 'number' && typeof db === 'number') {
      throw new ShapeError(`${op}: cannot broadcast ${formatShape(a)} with ${formatShape(b)} (dim ${da} vs ${db})`)
    } else if (typeof da === 'number') out.push(da)
    else if (typeof db === 'number') out.push(db)
    else out.push(isUnknownDim(da) ? db : da)
  }
  return out
}

/** Sum of two dimensions, symbolic when either is a name. */
export function addDims(a: Dim, b: Dim): Dim {
  if (typeof a === 'number' && typeof b === 'number') return a + b
  if (a === 0) return b
  if (b === 0) return a
  if (isUnknownDim(a) || isUnknownDim(b)) return unknownDim()
  return `${a}+${b}`
}

/** Product of dimensions, or undefined when any is symbolic. */
export function numel(shape: Shape): number | undefined {
  let n = 1
  for (const d of shape) {
    if (typeof d !== 'number') return undefined
    n *= d
  }
  return n
}
