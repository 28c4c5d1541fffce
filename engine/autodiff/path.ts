import { isFloat } from '../dtype.ts'
import type { Graph, Node, Value } from '../ir.ts'

/** The part of the graph the backward walk visits. */
export interface DifferentiablePath {
  /** Nodes that read a value depending on some `wrt` and whose outputs reach the loss, last node first. */
  readonly nodes: readonly Node[]
  /** Whether `v` is a float value on a path wrt → loss, i.e. one whose gradient some `wrt` needs. */
  needsGrad(v: Value | null): v is Value
}

/** Nodes and values on a path from some `wrt` to `loss`: downstream of a `wrt` and upstream of the loss. */
export function differentiablePath(graph: Graph, loss: Value, wrt: readonly Value[]): DifferentiablePath {
  const dependsOnWrt = new Set<number>(wrt.map((w) => w.id))
  for (const node of graph.nodes) {
    if (node.inputs.some((v) => v && dependsOnWrt.has(v.id))) for (const y of node.outputs) dependsOnWrt.add(y.id)
  }
  const reachesLoss = new Set<number>([loss.id])
  const nodes: Node[] = []
  for (let i = graph.nodes.length - 1; i >= 0; i--) {
    const node = graph.nodes[i]!
    if (!node.outputs.some((y) => reachesLoss.has(y.id))) continue
    for (const x of node.inputs) if (x) reachesLoss.add(x.id)
    if (node.inputs.some((x) => x && dependsOnWrt.has(x.id))) nodes.push(node)
  }
  return {
    nodes,
    needsGrad: (v): v is Value => !!v && isFloat(v.dtype) && dependsOnWrt.has(v.id) && reachesLoss.has(v.id),
  }
}
