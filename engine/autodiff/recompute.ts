import type { Block, Graph, Value } from '../ir.ts'

/**
 * Activation checkpointing: appends a copy of `block`'s nodes rebuilt from `inputs` (its `recompute`), each passed
 * through `tie` first (so the runtime neither runs the copy early nor merges it with the forward nodes). Nodes
 * that do not depend on those inputs, and values read from outside (weights), are shared with the forward pass.
 * Returns the rebuilt values by forward value id.
 */
export function rebuildBlock(
  graph: Graph,
  block: Block,
  inputs: readonly Value[],
  tie: (v: Value) => Value,
): Map<number, Value> {
  const fresh = new Map<number, Value>()
  for (const x of inputs) fresh.set(x.id, tie(x))
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
  return fresh
}
