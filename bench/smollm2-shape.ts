// SmolLM2-135M's shape, for the benchmarks that run it with random weights when the real ones are not needed.
import { fromHuggingFaceConfig, type ModelConfig } from '../policy/config.ts'

/** SmolLM2-135M-Instruct's config.json fields that the model config reads. */
export const SMOLLM2_CONFIG = {
  model_type: 'llama',
  vocab_size: 49152,
  hidden_size: 576,
  intermediate_size: 1536,
  num_hidden_layers: 30,
  num_attention_heads: 9,
  num_key_value_heads: 3,
  head_dim: 64,
  rms_norm_eps: 1e-5,
  rope_theta: 100000,
  max_position_embeddings: 8192,
  tie_word_embeddings: true,
}

export function smollm2Config(): ModelConfig {
  return fromHuggingFaceConfig(SMOLLM2_CONFIG)
}
