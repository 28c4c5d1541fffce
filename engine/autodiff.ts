// Reverse-mode differentiation over the graph IR. Generic: it reads each node's rule from OPS and never
// looks at op names itself.
import type { Builder } from './builder.ts'
import { isFloat } from './dtype.ts'
import { GradientError, UnsupportedGradientError } from './errors.ts'
import type { Block, Node, Value } from './ir.ts'
import { attrReader, NONDIFFERENTIABLE, type OpDef, type VjpContext } from './op-def.ts'
import { OPS } from './ops/index.ts'
import { formatShape } from './shape.ts'

/** A ConstantOfShape of zeros (what `zerosLike` builds). */
function isZeros(v: Value | null): boolean {
  const p = v?.producer
  if (p?.opType !== 'ConstantOfShape') return false
  const value = p.attrs.value
  return (
    !value ||
    (value.type === 'tensor' && Array.from(value.value.data as ArrayLike<number>).every((x) => Number(x) === 0))
  )
}

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
  const contributions = new Map<number, Value>()
  let marked = firstNode
  const markCreated = () => {
    for (; marked < graph.nodes.length; marked++) for (const y of graph.nodes[marked]!.outputs) created.add(y.id)
  }
  // summed as contributions arrive, so only the running sum stays alive (a weight used by many nodes, like
  // a tied embedding read by every logit chunk, would otherwise keep every contribution until the last)
  const add = (v: Value, g: Value) => {
    if (g.dtype !== v.dtype) throw new GradientError(`gradient for ${graph.describe(v)} has dtype ${g.dtype}`)
    const sum = contributions.get(v.id)
    contributions.set(v.id, sum ? op.scope(`${v.name}_grad`, () => accumulate(sum, g)) : g)
    markCreated()
  }
  // sum + g; a fresh scatter-add into zeros (an embedding's gradient) scatters into the sum instead, so no
  // zero tensor of the weight's size is made (the runtime would even fold it into a constant of that size)
  const accumulate = (sum: Value, g: Value): Value => {
    const p = g.producer
    const scatter = p && created.has(g.id) && (p.opType === 'ScatterND' || p.opType === 'ScatterElements')
    if (!scatter || p.attrs.reduction?.value !== 'add' || !isZeros(p.inputs[0] ?? null)) return op.Add(sum, g)
    const [into] = graph.addNode(p.kind, p.opType, p.domain, [sum, ...p.inputs.slice(1)], p.attrs, [
      { dtype: sum.dtype, shape: sum.shape },
    ])
    return into!
  }
  // the summed gradient of v; named `${v.name}_grad` when it is a fresh value not already named for another
  const total = (v: Value): Value | undefined => {
    const sum = contributions.get(v.id)
    if (!sum) return undefined
    if (created.has(sum.id) && !claimed.has(sum.id)) {
      op.named(sum, graph.freeName(`${v.name}_grad`))
      claimed.add(sum.id)
    }
    return sum
  }

  const seed = options.seed ?? op.scope(`${loss.name}_grad`, () => op.Expand(op.scalar(1, loss.dtype), op.Shape(loss)))
  if (seed.dtype !== loss.dtype)
    throw new GradientError(`seed ${graph.describe(seed)} for loss ${graph.describe(loss)}`)
  add(loss, seed)

  const blockOf = new Map<number, Block>()
  for (const block of graph.blocks) for (const id of block.nodes) blockOf.set(id, block)
  const entered = new Map<Block, Map<number, Value>>()
  let previous: Block | undefined
  // gradient sums so far of the values `block` reads from outside itself (its weights)
  const readSums = (block: Block): Value[] => {
    const inside = graph.nodes.filter((n) => block.nodes.has(n.id))
    const produced = new Set(inside.flatMap((n) => n.outputs.map((y) => y.id)))
    const sums = new Set<Value>()
    for (const n of inside)
      for (const x of n.inputs) {
        const sum = x && !produced.has(x.id) ? contributions.get(x.id) : undefined
        if (sum) sums.add(sum)
      }
    return [...sums]
  }
  /**
   * Entering `block` at its last node on the path, whose output gradients are `dys`: a zero computed from
   * those gradients and from the gradient sums of the values the previous block and this one read, so the
   * runtime cannot start here before the blocks after it are done (finite whatever the gradients hold).
   * Tied to it: the gradients (the block's backward waits) or, with recompute, the block's inputs and a
   * rebuilt copy of its nodes. Returns the rebuilt values by forward value id.
   */
  const enter = (block: Block, node: Node, dys: (Value | undefined)[]): Map<number, Value> => {
    const known = entered.get(block)
    if (known) return known
    const fresh = new Map<number, Value>()
    const g = dys.find((d) => d !== undefined)!
    op.scope(`${block.name}_backward`, () => {
      const after = [g, ...(previous ? readSums(previous) : []), ...readSums(block)].filter((t) => isFloat(t.dtype))
      const total = after
        .map((t) => op.Cast(op.ReduceSum(t, undefined, { keepdims: 0 }), g.dtype))
        .reduce((a, b) => op.Add(a, b))
      const zero = op.Mul(op.Cast(op.Greater(op.Abs(total), 0), g.dtype), 0)
      const tie = (v: Value) => op.Add(v, v.dtype === g.dtype ? zero : op.Cast(zero, v.dtype))
      if (!block.recompute) {
        node.outputs.forEach((y, i) => {
          const d = dys[i]
          if (!d) return
          dys[i] = tie(d)
          contributions.set(y.id, dys[i])
        })
        return
      }
      for (const x of block.recompute) fresh.set(x.id, tie(x))
      for (const n of graph.nodes.filter((m) => block.nodes.has(m.id))) {
        if (!n.inputs.some((x) => x && fresh.has(x.id))) continue
        const inputs = n.inputs.map((x) => (x ? (fresh.get(x.id) ?? x) : null))
        const outputs = graph.addNode(
          n.kind,
          n.opType,
          n.domain,
          inputs,
          n.attrs,
          n.outputs.map((y) => ({ dtype: y.dtype, shape: y.shape, ...(y.known ? { known: y.known } : {}) })),
        )
        n.outputs.forEach((y, i) => {
          fresh.set(y.id, outputs[i]!)
        })
      }
    })
    markCreated()
    entered.set(block, fresh)
    previous = block
    return fresh
  }

  for (const node of onPath) {
    const dys = node.outputs.map((y) => (isFloat(y.dtype) ? total(y) : undefined))
    if (dys.every((g) => g === undefined)) continue
    const def = node.kind === null ? undefined : (OPS as Record<string, OpDef>)[node.kind]
    if (!def) throw new UnsupportedGradientError(node.opType, node.name)
    if (def.vjp === NONDIFFERENTIABLE) continue
    const vjp = def.vjp
    const block = blockOf.get(node.id)
    const values = block ? enter(block, node, dys) : undefined
    const current = (v: Value) => values?.get(v.id) ?? v
    const grads = op.scope(`${node.name}_grad`, () => {
      const filled = node.outputs.map((y, i) => dys[i] ?? op.zerosLike(y))
      const ctx: VjpContext = {
        node,
        x: node.inputs.map((x) => x && current(x)),
        y: node.outputs.map(current),
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
