import type { Builder } from '../builder.ts'
import { GradientError } from '../errors.ts'
import type { Graph, Value } from '../ir.ts'

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

/** The values made by nodes the backward walk appends, from construction until `close()`. */
class AppendedValues {
  readonly #graph: Graph
  readonly #ids = new Set<number>()
  #marked: number
  #end: number | undefined

  constructor(graph: Graph) {
    this.#graph = graph
    this.#marked = graph.nodes.length
  }

  has(v: Value): boolean {
    const end = this.#end ?? this.#graph.nodes.length
    for (; this.#marked < end; this.#marked++)
      for (const y of this.#graph.nodes[this.#marked]!.outputs) this.#ids.add(y.id)
    return this.#ids.has(v.id)
  }

  /** Nodes appended from now on (the gradients' final Identity nodes, zeros for unused values) are not the walk's. */
  close(): void {
    this.#end ??= this.#graph.nodes.length
  }
}

/**
 * The gradient of each value reached so far, summed as contributions arrive so that only the running sum stays
 * alive (a weight used by many nodes, like a tied embedding read by every logit chunk, would otherwise keep every
 * contribution until the last), and named after its primal once complete.
 */
export class GradientSums {
  readonly #op: Builder
  readonly #sums = new Map<number, Value>()
  /** Sums already named after some value's gradient. */
  readonly #claimed = new Set<number>()
  readonly #appended: AppendedValues

  /** Create it before the walk appends its first node: what it appends from then on is its own to name. */
  constructor(op: Builder) {
    this.#op = op
    this.#appended = new AppendedValues(op.graph)
  }

  /** Adds the contribution `g` to the gradient of `v`. */
  add(v: Value, g: Value): void {
    if (g.dtype !== v.dtype) throw new GradientError(`gradient for ${this.#op.graph.describe(v)} has dtype ${g.dtype}`)
    const sum = this.#sums.get(v.id)
    this.#sums.set(v.id, sum ? this.#op.scope(`${v.name}_grad`, () => this.#accumulate(sum, g)) : g)
  }

  /** The running sum of `v`'s gradient as it stands, unnamed (undefined when nothing reached it yet). */
  get(v: Value): Value | undefined {
    return this.#sums.get(v.id)
  }

  /** Replaces the running sum of `v` (with the same gradient tied to a scheduling edge). */
  replace(v: Value, sum: Value): void {
    this.#sums.set(v.id, sum)
  }

  /** The summed gradient of `v`; named `${v.name}_grad` when it is a fresh value not already named for another. */
  total(v: Value): Value | undefined {
    const sum = this.#sums.get(v.id)
    if (!sum) return undefined
    if (this.#appended.has(sum) && !this.#claimed.has(sum.id)) {
      this.#op.named(sum, this.#op.graph.freeName(`${v.name}_grad`))
      this.#claimed.add(sum.id)
    }
    return sum
  }

  /** Ends the walk: from here on only `result` is called. */
  close(): void {
    this.#appended.close()
  }

  /**
   * `g` as the gradient of `w`, named `${w.name}_grad`: renamed when it is the walk's own unnamed value, else
   * (a forward value, another value's gradient, zeros made after the walk) through an Identity of that name.
   */
  result(w: Value, g: Value): Value {
    const name = `${w.name}_grad`
    if (g.name !== name) {
      if (this.#claimed.has(g.id) || !this.#appended.has(g) || g.producer === null) g = this.#op.Identity(g)
      this.#op.named(g, this.#op.graph.freeName(name))
    }
    this.#claimed.add(g.id)
    return g
  }

  // sum + g; a fresh scatter-add into zeros (an embedding's gradient) scatters into the sum instead, so no
  // zero tensor of the weight's size is made (the runtime would even fold it into a constant of that size)
  #accumulate(sum: Value, g: Value): Value {
    const p = g.producer
    const scatter = p && this.#appended.has(g) && (p.opType === 'ScatterND' || p.opType === 'ScatterElements')
    if (!scatter || p.attrs.reduction?.value !== 'add' || !isZeros(p.inputs[0] ?? null)) return this.#op.Add(sum, g)
    const [into] = this.#op.graph.addNode(p.kind, p.opType, p.domain, [sum, ...p.inputs.slice(1)], p.attrs, [
      { dtype: sum.dtype, shape: sum.shape },
    ])
    return into!
  }
}
