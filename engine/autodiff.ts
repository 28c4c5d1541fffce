// Reverse-mode differentiation over the graph IR. Generic: it reads each node's rule from OPS and never
// looks at op names itself.
import type { Builder } from './builder.ts'
import { isFloat } from './dtype.ts'
import { GradientError, UnsupportedGradientError } from './errors.ts'
import type { Node, Value } from './ir.ts'
import { attrReader, NONDIFFERENTIABLE, type OpDef, type VjpContext } from './op-def.ts'
import { OPS } from './ops/index.ts'
import { formatShape } from './shape.ts'

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
  for (const w of wrt) {
    if (!isFloat(w.dtype))
      throw new GradientError(`gradient with respect to ${graph.describe(w)}: only float values have gradients`)
  }
  if (!isFloat(loss.dtype)) throw new GradientError(`loss ${graph.describe(loss)} is not a float value`)

  // nodes on a path wrt → loss: downstream of some wrt and upstream of the loss
  const wrtIds = new Set(wrt.map((w) => w.id))
  const dependsOnWrt = new Set<number>(wrtIds)
  for (const node of graph.nodes) {
    if (node.inputs.some((v) => v && dependsOnWrt.has(v.id))) for (const y of node.outputs) dependsOnWrt.add(y.id)
  }
  const reachesLoss = new Set<number>([loss.id])
  const onPath: Node[] = []
  for (let i = graph.nodes.length - 1; i >= 0; i--) {
    const node = graph.nodes[i]!
    if (!node.outputs.some((y) => reachesLoss.has(y.id))) continue
    for (const x of node.inputs) if (x) reachesLoss.add(x.id)
    if (node.inputs.some((x) => x && dependsOnWrt.has(x.id))) onPath.push(node)
  }
  const needsGrad = (v: Value | null): v is Value =>
    !!v && isFloat(v.dtype) && dependsOnWrt.has(v.id) && reachesLoss.has(v.id)

  const created = new Set<number>()
  const claimed = new Set<number>()
  const firstNode = graph.nodes.length
  const contributions = new Map<number, Value[]>()
  const add = (v: Value, g: Value) => {
    if (g.dtype !== v.dtype) throw new GradientError(`gradient for ${graph.describe(v)} has dtype ${g.dtype}`)
    const list = contributions.get(v.id)
    if (list) list.push(g)
    else contributions.set(v.id, [g])
  }
  let marked = firstNode
  const markCreated = () => {
    for (; marked < graph.nodes.length; marked++) for (const y of graph.nodes[marked]!.outputs) created.add(y.id)
  }
  // the summed gradient of v; named `${v.name}_grad` when it is a fresh value not already named for another
  const total = (v: Value): Value | undefined => {
    const parts = contributions.get(v.id)
    if (!parts) return undefined
    let sum = parts[0]!
    if (parts.length > 1) {
      sum = op.scope(`${v.name}_grad`, () => parts.slice(1).reduce((acc, g) => op.Add(acc, g), sum))
      markCreated()
    }
    if (created.has(sum.id) && !claimed.has(sum.id)) {
      op.named(sum, graph.freeName(`${v.name}_grad`))
      claimed.add(sum.id)
    }
    contributions.set(v.id, [sum])
    return sum
  }

  const seed = options.seed ?? op.scope(`${loss.name}_grad`, () => op.Expand(op.scalar(1, loss.dtype), op.Shape(loss)))
  if (seed.dtype !== loss.dtype)
    throw new GradientError(`seed ${graph.describe(seed)} for loss ${graph.describe(loss)}`)
  add(loss, seed)

  for (const node of onPath) {
    const dys = node.outputs.map((y) => (isFloat(y.dtype) ? total(y) : undefined))
    if (dys.every((g) => g === undefined)) continue
    const def = node.kind === null ? undefined : (OPS as Record<string, OpDef>)[node.kind]
    if (!def) throw new UnsupportedGradientError(node.opType, node.name)
    if (def.vjp === NONDIFFERENTIABLE) continue
    const vjp = def.vjp
    const grads = op.scope(`${node.name}_grad`, () => {
      const filled = node.outputs.map((y, i) => dys[i] ?? op.zerosLike(y))
      const ctx: VjpContext = {
        node,
        x: node.inputs,
        y: node.outputs,
        dy: filled[0]!,
        dys: filled,
        attrs: attrReader(node.opType, node.attrs),
        needs: node.inputs.map(needsGrad),
      }
      return vjp(op, ctx)
    })
    markCreated()
    // rules may list trailing optional inputs that this node omits, as long as they give them no gradient
    if (grads.length < node.inputs.length || grads.slice(node.inputs.length).some((g) => g)) {
      throw new GradientError(
        `${node.opType} (node ${node.name}): rule returned ${grads.length} gradients for ${node.inputs.length} inputs`,
      )
    }
    node.inputs.forEach((x, i) => {
      const g = grads[i]
      if (!needsGrad(x) || !g) return
      if (g.shape.length !== x.shape.length) {
        throw new GradientError(
          `${node.opType} (node ${node.name}): gradient ${formatShape(g.shape)} for input ${graph.describe(x)}`,
        )
      }
      add(x, g)
    })
  }

  return wrt.map((w) => {
    let g = total(w)
    if (!g) {
      if (!options.allowUnused) {
        throw new GradientError(`${graph.describe(w)} does not reach loss ${loss.name} through differentiable ops`)
      }
      g = op.zerosLike(w)
    }
    const name = `${w.name}_grad`
    if (g.name !== name) {
      g = claimed.has(g.id) || !created.has(g.id) || g.producer === null ? op.Identity(g) : g
      op.named(g, graph.freeName(name))
    }
    claimed.add(g.id)
    return options.outputs === false ? g : op.output(g)
  })
}
