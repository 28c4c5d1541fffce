import { type ConstTensor, encodeModel } from '../engine/index.ts'
import { buildDecodeGraph, buildForwardGraph, IO } from './model.ts'
import { parameterSpecs } from './parameters.ts'
import { ropeTables } from './rope.ts'
import type { Trainer } from './trainer.ts'

/**
 * A standalone ONNX model for deployment: the decode graph (KV-cache serving) or the full forward graph
 * (logits), with the weights and rotary tables stored inside as initializers; LoRA adapters are merged into the
 * weights (W + (alpha / r)·B·A), so the exported graph is the plain model. Protobuf caps a model at 2 GB,
 * so models above ~500M float32 parameters need ONNX external data (not written yet).
 */
export async function exportStandaloneOnnx(
  trainer: Trainer,
  kind: 'decode' | 'forward' = 'decode',
): Promise<Uint8Array> {
  const { config, dtype } = trainer.model
  const weights = await trainer.mergedWeights()
  const graph = kind === 'decode' ? buildDecodeGraph(config, dtype) : buildForwardGraph(config, dtype)
  const float = (dims: number[], values: ArrayLike<number>) => trainer.model.float(dims, values) as ConstTensor
  const { cos, sin } = ropeTables(config, config.maxPositions)
  const initializers: Record<string, ConstTensor> = {
    [IO.ropeCos]: float([config.maxPositions, config.headDim], cos),
    [IO.ropeSin]: float([config.maxPositions, config.headDim], sin),
  }
  for (const spec of parameterSpecs(config))
    initializers[spec.name] = float(spec.shape, weights.get(spec.name) as Float32Array)
  return encodeModel(graph, { initializers })
}
