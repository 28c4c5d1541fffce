import { z } from 'zod'

/**
 * A Llama-style decoder: RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention, optional QKV bias
 * and tied embeddings. Covers Llama, Qwen2 / Qwen2.5 and SmolLM checkpoints.
 */
export const ModelConfigSchema = z
  .object({
    family: z.enum(['llama', 'qwen2']),
    vocabSize: z.number().int().positive(),
    hiddenSize: z.number().int().positive(),
    intermediateSize: z.number().int().positive(),
    numLayers: z.number().int().positive(),
    numHeads: z.number().int().positive(),
    numKvHeads: z.number().int().positive(),
    headDim: z.number().int().positive(),
    rmsNormEps: z.number().positive(),
    ropeTheta: z.number().positive(),
    maxPositions: z.number().int().positive(),
    qkvBias: z.boolean(),
    /**
     * A bias on the attention output projection (o_proj). transformers' Llama `attention_bias` means q, k, v
     * *and* o biases; Qwen2 has q, k, v biases only.
     */
    outputBias: z.boolean().optional(),
    tieEmbeddings: z.boolean(),
    /**
     * A learned absolute position table added to the token embeddings, on top of rotary attention (built-in
     * model only; not a Hugging Face layout). Rotary attention leaves values position-free, so a small model
     * must work out where a grid cell sits through attention alone; the table hands it the position directly.
     */
    learnedPositions: z.boolean().optional(),
  })
  .superRefine((c, ctx) => {
    if (c.numHeads % c.numKvHeads !== 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['numKvHeads'],
        message: `numHeads ${c.numHeads} is not a multiple of numKvHeads ${c.numKvHeads}`,
      })
    }
    if (c.headDim % 2 !== 0)
      ctx.addIssue({ code: 'custom', path: ['headDim'], message: `rotary needs an even head size, got ${c.headDim}` })
  })

export type ModelConfig = z.infer<typeof ModelConfigSchema>

/** Built-in shapes: `tiny` trains from scratch on 2 CPU cores; the Qwen2.5 rows match the released models. */
export const PRESETS = {
  /** ~3.6M parameters with a 2,048-token vocabulary; head size 64 (a multiple of 8, as fused attention wants). */
  tiny: {
    family: 'llama',
    vocabSize: 2048,
    hiddenSize: 256,
    intermediateSize: 704,
    numLayers: 4,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 64,
    rmsNormEps: 1e-5,
    ropeTheta: 10000,
    maxPositions: 2048,
    qkvBias: false,
    tieEmbeddings: true,
  },
  /** The engine benchmark's reference shape (docs/benchmarks.md §7): 4 layers, d=256, 4 heads, ff=1024, vocab 8192. */
  bench: {
    family: 'llama',
    vocabSize: 8192,
    hiddenSize: 256,
    intermediateSize: 1024,
    numLayers: 4,
    numHeads: 4,
    numKvHeads: 4,
    headDim: 64,
    rmsNormEps: 1e-5,
    ropeTheta: 10000,
    maxPositions: 2048,
    qkvBias: false,
    tieEmbeddings: false,
  },
  'qwen2.5-0.5b': qwen25(896, 4864, 24, 14),
  'qwen2.5-1.5b': qwen25(1536, 8960, 28, 12),
  'qwen2.5-3b': qwen25(2048, 11008, 36, 16),
} as const satisfies Record<string, ModelConfig>

export type PresetName = keyof typeof PRESETS

function qwen25(hiddenSize: number, intermediateSize: number, numLayers: number, numHeads: number): ModelConfig {
  return {
    family: 'qwen2',
    vocabSize: 151936,
    hiddenSize,
    intermediateSize,
    numLayers,
    numHeads,
    numKvHeads: 2,
    headDim: hiddenSize / numHeads,
    rmsNormEps: 1e-6,
    ropeTheta: 1000000,
    maxPositions: 32768,
    qkvBias: true,
    tieEmbeddings: true,
  }
}

export class ModelConfigError extends Error {
  override name = 'ModelConfigError'
}

/** config.json key of `learnedPositions` models (not a transformers field). */
const LEARNED_POSITIONS_KEY = 'seedflow_learned_positions'

/** Reads a Hugging Face config.json of a Llama or Qwen2 architecture. */
export function fromHuggingFaceConfig(hf: Record<string, unknown>, source = 'config.json'): ModelConfig {
  const modelType = hf.model_type
  if (modelType !== 'llama' && modelType !== 'qwen2') {
    throw new ModelConfigError(`${source}: model_type ${JSON.stringify(modelType)} is not supported (llama, qwen2)`)
  }
  const num = (key: string, fallback?: number): number => {
    const value = hf[key] ?? fallback
    if (typeof value !== 'number')
      throw new ModelConfigError(`${source}: ${key} is missing or not a number (${JSON.stringify(value)})`)
    return value
  }
  // transformers ≥ 5 writes rope_parameters { rope_theta, rope_type }; older versions rope_theta and rope_scaling.
  const rope = (hf.rope_parameters ?? {}) as { rope_theta?: number; rope_type?: string }
  const scaling = hf.rope_scaling ?? (rope.rope_type && rope.rope_type !== 'default' ? rope : null)
  if (scaling !== undefined && scaling !== null) {
    throw new ModelConfigError(`${source}: rope scaling ${JSON.stringify(scaling)} is not supported yet`)
  }
  refuseUnimplemented(hf, modelType, source)
  const numHeads = num('num_attention_heads')
  const hiddenSize = num('hidden_size')
  const attentionBias = modelType === 'llama' && hf.attention_bias === true
  const parsed = ModelConfigSchema.safeParse({
    family: modelType,
    vocabSize: num('vocab_size'),
    hiddenSize,
    intermediateSize: num('intermediate_size'),
    numLayers: num('num_hidden_layers'),
    numHeads,
    numKvHeads: num('num_key_value_heads', numHeads),
    headDim: num('head_dim', hiddenSize / numHeads),
    rmsNormEps: num('rms_norm_eps'),
    ropeTheta: num('rope_theta', rope.rope_theta ?? 10000),
    maxPositions: num('max_position_embeddings'),
    qkvBias: modelType === 'qwen2' ? true : attentionBias,
    ...(attentionBias ? { outputBias: true } : {}),
    tieEmbeddings: hf.tie_word_embeddings === true,
    ...(hf[LEARNED_POSITIONS_KEY] === true ? { learnedPositions: true } : {}),
  })
  if (!parsed.success) {
    throw new ModelConfigError(
      `${source}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    )
  }
  return parsed.data
}

/**
 * config.json fields whose value changes what transformers computes, with the values this model implements.
 * Any other value is refused, naming the field: a Llama with `hidden_act: "gelu"` would otherwise import and give
 * wrong logits. (Rope scaling is refused above.)
 */
const IMPLEMENTED: Record<string, { values: readonly unknown[] }> = {
  hidden_act: { values: ['silu', undefined] },
  mlp_bias: { values: [false, undefined] },
  pretraining_tp: { values: [1, undefined, null] },
  use_sliding_window: { values: [false, undefined, null] },
  use_qk_norm: { values: [false, undefined, null] },
  attention_dropout: { values: [0, undefined, null] },
}

function refuseUnimplemented(hf: Record<string, unknown>, modelType: string, source: string): void {
  for (const [field, { values }] of Object.entries(IMPLEMENTED)) {
    const value = hf[field]
    if (!values.includes(value))
      throw new ModelConfigError(
        `${source}: ${field} ${JSON.stringify(value)} is not implemented by seedflow's ${modelType} model ` +
          `(it implements ${values
            .filter((v) => v !== undefined && v !== null)
            .map((v) => JSON.stringify(v))
            .join(' or ')})`,
      )
  }
}

/** The Hugging Face config.json that transformers loads for this model. */
export function toHuggingFaceConfig(
  c: ModelConfig,
  tokens: { bosId?: number; eosIds: readonly number[] },
): Record<string, unknown> {
  const common = {
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numLayers,
    num_attention_heads: c.numHeads,
    num_key_value_heads: c.numKvHeads,
    head_dim: c.headDim,
    hidden_act: 'silu',
    rms_norm_eps: c.rmsNormEps,
    rope_theta: c.ropeTheta,
    max_position_embeddings: c.maxPositions,
    tie_word_embeddings: c.tieEmbeddings,
    torch_dtype: 'float32',
    bos_token_id: tokens.bosId ?? null,
    eos_token_id: tokens.eosIds.length === 1 ? tokens.eosIds[0] : [...tokens.eosIds],
    initializer_range: 0.02,
    use_cache: true,
    // our own key: transformers ignores it (and the position table), so such a checkpoint is ours alone
    ...(c.learnedPositions ? { [LEARNED_POSITIONS_KEY]: true } : {}),
  }
  if (c.family === 'qwen2' && c.outputBias)
    throw new ModelConfigError('a Qwen2 model has no o_proj bias in transformers; this one has one')
  return c.family === 'qwen2'
    ? { architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', ...common, use_sliding_window: false }
    : {
        architectures: ['LlamaForCausalLM'],
        model_type: 'llama',
        ...common,
        attention_bias: llamaAttentionBias(c),
        mlp_bias: false,
      }
}

/** transformers' Llama has one switch for all four attention biases: a model with only some cannot be written. */
function llamaAttentionBias(c: ModelConfig): boolean {
  if (c.qkvBias !== (c.outputBias ?? false))
    throw new ModelConfigError(
      `a Llama model with ${c.qkvBias ? 'q/k/v biases but no o_proj bias' : 'an o_proj bias but no q/k/v biases'} ` +
        'has no transformers config (attention_bias covers all four)',
    )
  return c.qkvBias
}
