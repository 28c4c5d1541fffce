import type { ModelConfig } from './config.ts'

/** The learned absolute position table of `learnedPositions` models (not a Hugging Face name). */
export const POSITION_TABLE = 'model.embed_positions.weight'

/** One weight tensor, named as Hugging Face's Llama / Qwen2 modules name it. */
export interface ParameterSpec {
  name: string
  shape: number[]
  /** How a fresh model initialises it. */
  init: 'normal' | 'ones' | 'zeros'
}

/** Every parameter of the model, in a fixed order (the order of graph inputs and gradients). */
export function parameterSpecs(c: ModelConfig): ParameterSpec[] {
  const C = c.hiddenSize
  const q = c.numHeads * c.headDim
  const kv = c.numKvHeads * c.headDim
  const specs: ParameterSpec[] = [{ name: 'model.embed_tokens.weight', shape: [c.vocabSize, C], init: 'normal' }]
  if (c.learnedPositions) specs.push({ name: POSITION_TABLE, shape: [c.maxPositions, C], init: 'normal' })
  for (let l = 0; l < c.numLayers; l++) {
    const p = `model.layers.${l}`
    specs.push({ name: `${p}.input_layernorm.weight`, shape: [C], init: 'ones' })
    specs.push({ name: `${p}.self_attn.q_proj.weight`, shape: [q, C], init: 'normal' })
    if (c.qkvBias) specs.push({ name: `${p}.self_attn.q_proj.bias`, shape: [q], init: 'zeros' })
    specs.push({ name: `${p}.self_attn.k_proj.weight`, shape: [kv, C], init: 'normal' })
    if (c.qkvBias) specs.push({ name: `${p}.self_attn.k_proj.bias`, shape: [kv], init: 'zeros' })
    specs.push({ name: `${p}.self_attn.v_proj.weight`, shape: [kv, C], init: 'normal' })
    if (c.qkvBias) specs.push({ name: `${p}.self_attn.v_proj.bias`, shape: [kv], init: 'zeros' })
    specs.push({ name: `${p}.self_attn.o_proj.weight`, shape: [C, q], init: 'normal' })
    if (c.outputBias) specs.push({ name: `${p}.self_attn.o_proj.bias`, shape: [C], init: 'zeros' })
    specs.push({ name: `${p}.post_attention_layernorm.weight`, shape: [C], init: 'ones' })
    specs.push({ name: `${p}.mlp.gate_proj.weight`, shape: [c.intermediateSize, C], init: 'normal' })
    specs.push({ name: `${p}.mlp.up_proj.weight`, shape: [c.intermediateSize, C], init: 'normal' })
    specs.push({ name: `${p}.mlp.down_proj.weight`, shape: [C, c.intermediateSize], init: 'normal' })
  }
  specs.push({ name: 'model.norm.weight', shape: [C], init: 'ones' })
  if (!c.tieEmbeddings) specs.push({ name: 'lm_head.weight', shape: [c.vocabSize, C], init: 'normal' })
  return specs
}

export function parameterCount(c: ModelConfig): number {
  return parameterSpecs(c).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0)
}
