import type { Builder } from '../builder.ts'
import type { Block, Node, Value } from '../ir.ts'
import { rebuildBlock } from './recompute.ts'
import { outsideReadSums, schedulingTie } from './schedule.ts'
import type { GradientSums } from './sums.ts'

/** What the walk uses at a node: its output gradients, and its forward values (rebuilt ones in a recomputed block). */
export interface NodeEntry {
  readonly dys: readonly (Value | undefined)[]
  current(v: Value): Value
}

/**
 * The backward pass takes blocks (`op.block`: a decoder layer, a chunk of logits) one at a time: entering a
 * block, at its last node on the path, ties it to the gradient sums of the block entered before and of the values
 * this block reads (schedule.ts). What is tied: the gradients entering the block, so its backward waits; or,
 * for a recomputed block, its inputs, from which its nodes are rebuilt (recompute.ts).
 */
export class BlockEntries {
  readonly #op: Builder
  readonly #sums: GradientSums
  readonly #blockOf = new Map<number, Block>()
  readonly #entered = new Map<Block, Map<number, Value>>()
  #previous: Block | undefined

  constructor(op: Builder, sums: GradientSums) {
    this.#op = op
    this.#sums = sums
    for (const block of op.graph.blocks) for (const id of block.nodes) this.#blockOf.set(id, block)
  }

  /** `node`'s entry, whose output gradients are `dys` (at least one defined). */
  enter(node: Node, dys: readonly (Value | undefined)[]): NodeEntry {
    const block = this.#blockOf.get(node.id)
    if (!block) return { dys, current: (v) => v }
    const known = this.#entered.get(block)
    const entry = known ? { values: known, dys } : this.#firstEntry(block, node, dys)
    return { dys: entry.dys, current: (v) => entry.values.get(v.id) ?? v }
  }

  /** Ties the block to what must finish before its backward pass; rebuilds it when it is recomputed. */
  #firstEntry(block: Block, node: Node, dys: readonly (Value | undefined)[]) {
    const { graph } = this.#op
    const g = dys.find((d) => d !== undefined)!
    const after = [
      ...(this.#previous ? outsideReadSums(graph, this.#previous, this.#sums) : []),
      ...outsideReadSums(graph, block, this.#sums),
    ]
    const entry = this.#op.scope(`${block.name}_backward`, () => {
      const tie = schedulingTie(this.#op, g, after)
      if (block.recompute) return { values: rebuildBlock(graph, block, block.recompute, tie), dys }
      const tied = node.outputs.map((y, i) => {
        const d = dys[i]
        if (!d) return d
        const t = tie(d)
        this.#sums.replace(y, t)
        return t
      })
      return { values: new Map<number, Value>(), dys: tied }
    })
    this.#entered.set(block, entry.values)
    this.#previous = block
    return entry
  }
}
