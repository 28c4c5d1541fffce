/** A shape or dtype that an op cannot accept; the message names the op and every shape involved. */
export class ShapeError extends Error {
  override name = 'ShapeError'
}

/** A graph that is malformed: unknown value, duplicate name, wrong input count, bad attribute. */
export class GraphError extends Error {
  override name = 'GraphError'
}

/** Reverse-mode differentiation reached a node whose op has no gradient rule (or none for these attributes). */
export class UnsupportedGradientError extends Error {
  override name = 'UnsupportedGradientError'
  constructor(
    readonly opType: string,
    readonly nodeName: string,
    reason = 'no gradient rule',
  ) {
    super(`${opType}: ${reason} (node ${nodeName})`)
  }
}

/** A requested gradient that cannot be produced: unreachable parameter, non-float value, bad rule arity. */
export class GradientError extends Error {
  override name = 'GradientError'
}

/** Running a model failed: session creation, feeds that do not match the model, a worker that died. */
export class EngineRuntimeError extends Error {
  override name = 'EngineRuntimeError'
}

/** An error's message, or the thrown value as text. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
