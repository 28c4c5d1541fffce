// Reverse-mode differentiation over the graph IR. Generic: it reads each node's rule from OPS and never
// looks at op names itself. The walk is here; what it keeps and adds is under autodiff/: the path it visits
// (path.ts), the running gradient sums (sums.ts), one rule's application (rule.ts), and the blocks it takes
// one at a time (blocks.ts), tied by scheduling edges (schedule.ts) and optionally recomputed (recompute.ts).
import { BlockEntries } from './autodiff/blocks.ts'
import { differentiablePath } from './autodiff/path.ts'
import { applyRule, checkRank, ruleOf } from './autodiff/rule.ts'
import { GradientSums } from './autodiff/sums.ts'
import type { Builder } from './builder.ts'
import { isFloat } from './dtype.ts'
import { GradientError } from './errors.ts'
import type { Graph, Value } from './ir.ts'

export interface GradientOptions {
  /** Gradient of the final objective with respect to `loss` (default: ones, i.e. d Σloss). */
  seed?: Value
  /** Add each gradient as a graph output (default true). */
  outputs?: boolean
  /** Return zeros for a `wrt` that does not reach the loss through differentiable ops, instead of throwing. */
  allowUnused?: boolean
}

/**
 * Appends the backward pass to the graph that holds `loss` and returns d loss / d w for each `w` in `wrt`,
 * named `${w.name}_grad`. Contributions over fan-out are summed. A node on the path whose op has no rule
 * throws UnsupportedGradientError naming the op.
 */
export function gradients(op: Builder, loss: Value, wrt: readonly Value[], options: GradientOptions = {}): Value[] {
  const graph = op.graph
  checkFloat(graph, loss, wrt)
  const path = differentiablePath(graph, loss, wrt)
  const sums = new GradientSums(op)
  sums.add(loss, seedGradient(op, loss, options.seed))
  const blocks = new BlockEntries(op, sums)

  for (const node of path.nodes) {
    const dys = node.outputs.map((y) => (isFloat(y.dtype) ? sums.total(y) : undefined))
    if (dys.every((g) => g === undefined)) continue
    const vjp = ruleOf(node)
    if (!vjp) continue
    const grads = applyRule(op, vjp, node, blocks.enter(node, dys), path.needsGrad)
    node.inputs.forEach((x, i) => {
      const g = grads[i]
      if (!path.needsGrad(x) || !g) return
      checkRank(op, node, x, g)
      sums.add(x, g)
    })
  }
  sums.close()

  return wrt.map((w) => {
    let g = sums.total(w)
    if (!g) {
      if (!options.allowUnused) {
        throw new GradientError(`${graph.describe(w)} does not reach loss ${loss.name} through differentiable ops`)
      }
      g = op.zerosLike(w)
    }
    const named = sums.result(w, g)
    return options.outputs === false ? named : op.output(named)
  })
}

function checkFloat(graph: Graph, loss: Value, wrt: readonly Value[]): void {
  for (const w of wrt) {
    if (!isFloat(w.dtype))
      throw new GradientError(`gradient with respect to ${graph.describe(w)}: only float values have gradients`)
  }
  if (!isFloat(loss.dtype)) throw new GradientError(`loss ${graph.describe(loss)} is not a float value`)
}

/** d objective / d loss: `seed` when given, else ones of the loss's shape. */
function seedGradient(op: Builder, loss: Value, seed?: Value): Value {
  const g = seed ?? op.scope(`${loss.name}_grad`, () => op.Expand(op.scalar(1, loss.dtype), op.Shape(loss)))
  if (g.dtype !== loss.dtype)
    throw new GradientError(`seed ${op.graph.describe(g)} for loss ${op.graph.describe(loss)}`)
  return g
}
