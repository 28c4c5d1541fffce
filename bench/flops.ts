// What the engine benchmarks share: best-of timing, the in-graph MatMul peak and a model's forward FLOPs.
import { createBuilder, type Engine, encodeModel, Graph, tensor, type Value } from '../engine/index.ts'
import { mulberry32 } from '../envs/rng.ts'
import type { ModelConfig } from '../policy/config.ts'

export async function timeIt(fn: () => Promise<unknown>, repeats: number): Promise<number> {
  await fn() // warm-up: the first runs of a session are slow (docs/benchmarks.md §8)
  await fn()
  let best = Number.POSITIVE_INFINITY
  for (let i = 0; i < repeats; i++) {
    const started = performance.now()
    await fn()
    best = Math.min(best, (performance.now() - started) / 1000)
  }
  return best
}

/** GFLOP/s of one (M, K) × (K, N) MatMul kept inside the graph (only a scalar leaves it), best of 5. */
export async function matmulPeak(engine: Engine, M: number, K: number, N: number): Promise<number> {
  const graph = new Graph('matmul')
  const op = createBuilder(graph)
  const a = op.input('a', 'float32', [M, K])
  const b = op.input('b', 'float32', [K, N])
  op.output(op.ReduceSum(op.MatMul(a, b), undefined, { keepdims: 0 }) as Value, 'sum')
  const model = await engine.load(encodeModel(graph))
  const rng = mulberry32(1)
  const feeds = {
    a: tensor(
      'float32',
      [M, K],
      Float32Array.from({ length: M * K }, () => rng.next()),
    ),
    b: tensor(
      'float32',
      [K, N],
      Float32Array.from({ length: K * N }, () => rng.next()),
    ),
  }
  const seconds = await timeIt(() => engine.run(model, feeds), 5)
  return (2 * M * K * N) / seconds / 1e9
}

/** Forward FLOPs per sequence of T tokens: every MatMul, attention scores and the output layer included. */
export function forwardFlops(cfg: ModelConfig, tokens: number): number {
  const C = cfg.hiddenSize
  const q = cfg.numHeads * cfg.headDim
  const kv = cfg.numKvHeads * cfg.headDim
  const perTokenLinear = 2 * (C * q + 2 * C * kv + q * C + 3 * C * cfg.intermediateSize)
  const attention = 2 * 2 * tokens * tokens * q // QKᵀ and att·V over the full T×T (the mask does not save work)
  return cfg.numLayers * (tokens * perTokenLinear + attention) + tokens * 2 * C * cfg.vocabSize
}
