import { encodeModel } from '../engine/index.ts'
import { buildDecodeGraph, buildForwardGraph } from './model.ts'
import { PolicyModel } from './policy-model.ts'

/**
 * A standalone ONNX model for deployment: the decode graph (KV-cache serving) or the full forward graph
 * (logits), with the weights and rotary tables stored inside as initializers; LoRA adapters are merged into the
 * weights (W + (alpha / r)·B·A), so the exported graph is the plain model. Protobuf caps a model at 2 GB,
 * so models above ~500M float32 parameters need ONNX external data (not written yet).
 */
export function exportStandaloneOnnx(model: PolicyModel, kind: 'decode' | 'forward' = 'decode'): Uint8Array {
  const plain = model.lora
    ? new PolicyModel(model.engine, model.config, model.mergedWeights(), { dtype: model.dtype })
    : model
  const graph =
    kind === 'decode' ? buildDecodeGraph(model.config, model.dtype) : buildForwardGraph(model.config, model.dtype)
  return encodeModel(graph, { initializers: plain.baseFeeds() })
}
