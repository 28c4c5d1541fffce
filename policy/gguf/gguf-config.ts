// The model configuration of a GGUF file, from llama.cpp's metadata keys (`<arch>.block_count`, …), for the two
// architectures seedflow's model implements. Anything the metadata says that the model does not implement (rope
// scaling, a head size rotary does not cover, an unknown architecture) is refused by name.
import { type ModelConfig, ModelConfigSchema } from '../config.ts'
import { GgufError } from './gguf-error.ts'
import type { GgufTensorInfo } from './gguf-file.ts'

/** GGUF architectures and the model family each maps to. */
const ARCHITECTURES = { llama: 'llama', qwen2: 'qwen2' } as const
export type GgufArchitecture = keyof typeof ARCHITECTURES

/**
 * The float32 value a GGUF stores for a float64 config value (rms_norm_eps 1e-5 arrives as 9.99999974e-6): the
 * shortest decimal that rounds to the same float32, i.e. the value the model was configured with.
 */
export function shortestFloat32(x: number): number {
  const f = Math.fround(x)
  for (let digits = 1; digits <= 9; digits++) {
    const candidate = Number(f.toPrecision(digits))
    if (Math.fround(candidate) === f) return candidate
  }
  return f
}

export function ggufArchitecture(metadata: Record<string, unknown>, source: string): GgufArchitecture {
  const arch = metadata['general.architecture']
  if (typeof arch !== 'string' || !(arch in ARCHITECTURES))
    throw new GgufError(
      `${source}: architecture ${JSON.stringify(arch)} is not supported (seedflow's model implements ${Object.keys(ARCHITECTURES).join(', ')})`,
    )
  return arch as GgufArchitecture
}

/** The model configuration of a GGUF file; `tensors` tell tied embeddings and attention biases apart. */
export function ggufModelConfig(
  metadata: Record<string, unknown>,
  tensors: readonly GgufTensorInfo[],
  source: string,
): ModelConfig {
  const arch = ggufArchitecture(metadata, source)
  const key = (name: string) => `${arch}.${name}`
  const num = (name: string, fallback?: number): number => {
    const value = metadata[key(name)] ?? fallback
    if (typeof value !== 'number' || !Number.isFinite(value))
      throw new GgufError(`${source}: metadata ${key(name)} is missing or not a number (${String(value)})`)
    return value
  }
  for (const name of ['rope.scaling.type', 'rope.scaling.factor']) {
    const value = metadata[key(name)]
    if (value !== undefined && value !== 'none' && !(name.endsWith('factor') && value === 1))
      throw new GgufError(`${source}: ${key(name)} ${JSON.stringify(value)}: rope scaling is not supported yet`)
  }
  const names = new Set(tensors.map((t) => t.name))
  if (names.has('rope_freqs.weight'))
    throw new GgufError(`${source}: tensor rope_freqs.weight (Llama 3 rope scaling) is not supported yet`)
  const numHeads = num('attention.head_count')
  const hiddenSize = num('embedding_length')
  const headDim = num('attention.key_length', hiddenSize / numHeads)
  const ropeDims = num('rope.dimension_count', headDim)
  if (ropeDims !== headDim)
    throw new GgufError(
      `${source}: ${key('rope.dimension_count')} ${ropeDims} rotates part of each head (${headDim}); seedflow rotates whole heads`,
    )
  const valueDim = num('attention.value_length', headDim)
  if (valueDim !== headDim)
    throw new GgufError(`${source}: value heads of ${valueDim} differ from key heads of ${headDim}; not supported`)
  const tokens = metadata['tokenizer.ggml.tokens']
  const qkvBias = names.has('blk.0.attn_q.bias')
  const outputBias = names.has('blk.0.attn_output.bias')
  if (arch === 'qwen2' && (!qkvBias || outputBias))
    throw new GgufError(`${source}: a qwen2 model has q/k/v biases and no output bias; this file differs`)
  const parsed = ModelConfigSchema.safeParse({
    family: ARCHITECTURES[arch],
    vocabSize: num('vocab_size', Array.isArray(tokens) ? tokens.length : undefined),
    hiddenSize,
    intermediateSize: num('feed_forward_length'),
    numLayers: num('block_count'),
    numHeads,
    numKvHeads: num('attention.head_count_kv', numHeads),
    headDim,
    rmsNormEps: shortestFloat32(num('attention.layer_norm_rms_epsilon')),
    ropeTheta: shortestFloat32(num('rope.freq_base', 10000)),
    maxPositions: num('context_length'),
    qkvBias,
    ...(outputBias ? { outputBias: true } : {}),
    tieEmbeddings: !names.has('output.weight'),
  })
  if (!parsed.success)
    throw new GgufError(`${source}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`)
  return parsed.data
}
