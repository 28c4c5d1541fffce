import type { Builder } from '../builder.ts'
import { GradientError, UnsupportedGradientError } from '../errors.ts'
import type { Node, Value } from '../ir.ts'
import { attrReader, type Grads, NONDIFFERENTIABLE, type OpDef, type VjpFn } from '../op-def.ts'
import { OPS } from '../ops/index.ts'
import { formatShape } from '../shape.ts'
import type { NodeEntry } from './blocks.ts'

/** `node`'s gradient rule from OPS, or null when its op declares none; throws for an op without an entry. */
export function ruleOf(node: Node): VjpFn | null {
  const def = node.kind === null ? undefined : (OPS as Record<string, OpDef>)[node.kind]
  if (!def) throw new UnsupportedGradientError(node.opType, node.name)
  return def.vjp === NONDIFFERENTIABLE ? null : def.vjp
}

/** Runs `vjp` at `node`, its temporaries scoped under `${node.name}_grad`; one gradient (or null) per input. */
export function applyRule(
  op: Builder,
  vjp: VjpFn,
  node: Node,
  entry: NodeEntry,
  needsGrad: (v: Value | null) => boolean,
): Grads {
  const grads = op.scope(`${node.name}_grad`, () => {
    const filled = node.outputs.map((y, i) => entry.dys[i] ?? op.zerosLike(y))
    return vjp(op, {
      node,
      x: node.inputs.map((x) => x && entry.current(x)),
      y: node.outputs.map(entry.current),
      dy: filled[0]!,
      dys: filled,
      attrs: attrReader(node.opType, node.attrs),
      needs: node.inputs.map(needsGrad),
    })
  })
  // rules may list trailing optional inputs that this node omits, as long as they give them no gradient
  if (grads.length < node.inputs.length || grads.slice(node.inputs.length).some((g) => g)) {
    throw new GradientError(
      `${node.opType} (node ${node.name}): rule returned ${grads.length} gradients for ${node.inputs.length} inputs`,
    )
  }
  return grads
}

/** Refuses a gradient whose rank differs from its input's (a rule that forgot to reduce a broadcast). */
export function checkRank(op: Builder, node: Node, x: Value, g: Value): void {
  if (g.shape.length !== x.shape.length) {
    throw new GradientError(
      `${node.opType} (node ${node.name}): gradient ${formatShape(g.shape)} for input ${op.graph.describe(x)}`,
    )
  }
}
