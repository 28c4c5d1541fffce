// Scheduling edges for ONNX Runtime, which orders nodes by index and puts the nodes its optimizer creates (fused
// MatMuls) last: left alone, it would keep every weight gradient, and the activations it reads, alive until the
// end of the run. A block's backward pass is instead tied to a zero computed from the gradients that must be
// finished before it, so the runtime cannot start it earlier.
import type { Builder } from '../builder.ts'
import { isFloat } from '../dtype.ts'
import type { Block, Graph, Value } from '../ir.ts'
import type { GradientSums } from './sums.ts'

/** The gradient sums so far of the values `block` reads from outside itself (its weights, its inputs). */
export function outsideReadSums(graph: Graph, block: Block, sums: GradientSums): Value[] {
  const inside = graph.nodes.filter((n) => block.nodes.has(n.id))
  const produced = new Set(inside.flatMap((n) => n.outputs.map((y) => y.id)))
  const read = new Set<Value>()
  for (const n of inside)
    for (const x of n.inputs) {
      const sum = x && !produced.has(x.id) ? sums.get(x) : undefined
      if (sum) read.add(sum)
    }
  return [...read]
}

/**
 * `tie(v)` is `v` plus a zero computed from `g` and from every float value in `after`, so whatever reads the
 * result waits for all of them; the zero is finite whatever they hold (0 or 1, times 0).
 */
export function schedulingTie(op: Builder, g: Value, after: readonly Value[]): (v: Value) => Value {
  const total = [g, ...after]
    .filter((t) => isFloat(t.dtype))
    .map((t) => op.Cast(op.ReduceSum(t, undefined, { keepdims: 0 }), g.dtype))
    .reduce((a, b) => op.Add(a, b))
  const zero = op.Mul(op.Cast(op.Greater(op.Abs(total), 0), g.dtype), 0)
  return (v) => op.Add(v, v.dtype === g.dtype ? zero : op.Cast(zero, v.dtype))
}
