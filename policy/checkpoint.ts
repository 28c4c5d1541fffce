import type { CheckpointFile } from '../store/keys.ts'
import { chatTemplateOf } from './chat-template.ts'
import { fromHuggingFaceConfig, type ModelConfig, toHuggingFaceConfig } from './config.ts'
import { decodePeftAdapter, encodePeftAdapter, type LoraConfig } from './lora.ts'
import { parameterSpecs } from './parameters.ts'
import { decodeSafetensors, encodeSafetensors, fromFloat32, type RawTensor, toFloat32 } from './safetensors.ts'

/** LoRA adapters of a checkpoint and the frozen base weights they apply to. */
export interface CheckpointLora {
  config: LoraConfig
  adapters: Map<string, Float32Array>
  base: Map<string, Float32Array>
}

/** A model's weights (float32, Hugging Face names), its config and, for our own models, its tokenizer. */
export interface Checkpoint {
  config: ModelConfig
  /** What the model computes: with LoRA, the merged weights W + (alpha / r)·B·A (`lora.base` holds W). */
  weights: Map<string, Float32Array>
  lora?: CheckpointLora
  tokenizerJson?: object
  /** tokenizer_config.json of an imported model (chat template, special tokens); the built-in model has none. */
  tokenizerConfig?: Record<string, unknown>
  eosIds: number[]
  bosId?: number
}

export class CheckpointError extends Error {
  override name = 'CheckpointError'
}

/** adapter_config.json's base_model_name_or_path in a seedflow checkpoint. */
const LORA_BASE_NOTE = 'seedflow checkpoint: config.json + lora_base.safetensors (the folder above this adapter)'

/** Tensors some exporters write that carry nothing we need (recomputed rotary tables). */
const IGNORED_TENSOR = /\.rotary_emb\.inv_freq$/

/**
 * config.json key of a checkpoint whose prompts are the built-in model's plain `<|im_start|>` text `<|im_end|>`
 * (it has no chat template). Any other folder without a chat template is refused at import, so an instruct
 * model never silently gets a prompt format it was not trained on.
 */
export const BUILTIN_PROMPTS_KEY = 'seedflow_builtin_prompts'

export type CheckpointFiles = Partial<Record<CheckpointFile, Uint8Array>>

/** The files of a checkpoint folder, readable by Hugging Face transformers. */
export function encodeCheckpoint(checkpoint: Checkpoint): CheckpointFiles {
  checkWeights(checkpoint.config, checkpoint.weights, 'checkpoint')
  const tensors = new Map<string, RawTensor>()
  for (const spec of parameterSpecs(checkpoint.config)) {
    tensors.set(spec.name, fromFloat32(checkpoint.weights.get(spec.name) as Float32Array, spec.shape))
  }
  const hfConfig = toHuggingFaceConfig(checkpoint.config, {
    eosIds: checkpoint.eosIds,
    ...(checkpoint.bosId === undefined ? {} : { bosId: checkpoint.bosId }),
  })
  if (!chatTemplateOf(checkpoint.tokenizerConfig)) hfConfig[BUILTIN_PROMPTS_KEY] = true
  const files: CheckpointFiles = {
    'model.safetensors': encodeSafetensors(tensors, { format: 'pt' }),
    'config.json': json(hfConfig),
  }
  const lora = checkpoint.lora
  if (lora) {
    checkWeights(checkpoint.config, lora.base, 'checkpoint LoRA base')
    const base = new Map<string, RawTensor>()
    for (const spec of parameterSpecs(checkpoint.config))
      base.set(spec.name, fromFloat32(lora.base.get(spec.name) as Float32Array, spec.shape))
    // PEFT resolves base_model_name_or_path itself: here it names the file beside the adapter folder
    const adapter = encodePeftAdapter(checkpoint.config, lora.config, lora.adapters, LORA_BASE_NOTE)
    files['adapter/adapter_config.json'] = adapter.config
    files['adapter/adapter_model.safetensors'] = adapter.model
    files['lora_base.safetensors'] = encodeSafetensors(base, { format: 'pt' })
  }
  if (checkpoint.tokenizerJson) files['tokenizer.json'] = json(checkpoint.tokenizerJson)
  if (checkpoint.tokenizerConfig) files['tokenizer_config.json'] = json(checkpoint.tokenizerConfig)
  return files
}

/** Reads and validates a checkpoint: every tensor the config implies, with its shape, and nothing unknown. */
export function decodeCheckpoint(files: CheckpointFiles, source = 'checkpoint'): Checkpoint {
  const configBytes = files['config.json']
  const modelBytes = files['model.safetensors']
  if (!configBytes || !modelBytes) throw new CheckpointError(`${source}: needs config.json and model.safetensors`)
  const hf = JSON.parse(Buffer.from(configBytes).toString('utf8')) as Record<string, unknown>
  const config = fromHuggingFaceConfig(hf, `${source}/config.json`)
  const { tensors } = decodeSafetensors(modelBytes, `${source}/model.safetensors`)
  const weights = weightsFromTensors(config, tensors, `${source}/model.safetensors`)
  const eos = hf.eos_token_id
  const checkpoint: Checkpoint = {
    config,
    weights,
    eosIds: Array.isArray(eos) ? eos : typeof eos === 'number' ? [eos] : [],
  }
  if (typeof hf.bos_token_id === 'number') checkpoint.bosId = hf.bos_token_id
  const adapterConfig = files['adapter/adapter_config.json']
  const adapterModel = files['adapter/adapter_model.safetensors']
  const baseBytes = files['lora_base.safetensors']
  if (adapterConfig || adapterModel || baseBytes) {
    if (!adapterConfig || !adapterModel || !baseBytes)
      throw new CheckpointError(
        `${source}: a LoRA checkpoint needs adapter/adapter_config.json, adapter/adapter_model.safetensors and lora_base.safetensors`,
      )
    const { lora, adapters } = decodePeftAdapter(
      config,
      { config: adapterConfig, model: adapterModel },
      `${source}adapter`,
    )
    const base = weightsFromTensors(
      config,
      decodeSafetensors(baseBytes, `${source}/lora_base.safetensors`).tensors,
      `${source}/lora_base.safetensors`,
    )
    checkpoint.lora = { config: lora, adapters, base }
  }
  const tokenizer = files['tokenizer.json']
  if (tokenizer) checkpoint.tokenizerJson = JSON.parse(Buffer.from(tokenizer).toString('utf8'))
  const tokenizerConfig = files['tokenizer_config.json']
  if (tokenizerConfig) checkpoint.tokenizerConfig = JSON.parse(Buffer.from(tokenizerConfig).toString('utf8'))
  return checkpoint
}

/** Converts named tensors (any float dtype) to the config's weights, checking names and shapes. */
export function weightsFromTensors(
  config: ModelConfig,
  tensors: Map<string, RawTensor>,
  source: string,
): Map<string, Float32Array> {
  const weights = new Map<string, Float32Array>()
  const specs = parameterSpecs(config)
  const known = new Set(specs.map((s) => s.name))
  for (const spec of specs) {
    const tensor = tensors.get(spec.name)
    if (!tensor)
      throw new CheckpointError(
        `${source}: tensor ${spec.name} is missing (config expects shape [${spec.shape.join(', ')}])`,
      )
    if (!sameShape(tensor.shape, spec.shape)) {
      throw new CheckpointError(
        `${source}: tensor ${spec.name} has shape [${tensor.shape.join(', ')}] but the config expects [${spec.shape.join(', ')}]`,
      )
    }
    weights.set(spec.name, toFloat32(tensor, spec.name))
  }
  for (const name of tensors.keys()) {
    // A tied model may still carry lm_head.weight (some exporters write it): it must equal the embedding.
    if (known.has(name) || IGNORED_TENSOR.test(name) || (name === 'lm_head.weight' && config.tieEmbeddings)) continue
    throw new CheckpointError(`${source}: tensor ${name} is not part of a ${config.family} model with this config`)
  }
  return weights
}

export function checkWeights(config: ModelConfig, weights: Map<string, Float32Array>, source: string): void {
  for (const spec of parameterSpecs(config)) {
    const w = weights.get(spec.name)
    const n = spec.shape.reduce((a, b) => a * b, 1)
    if (!w) throw new CheckpointError(`${source}: tensor ${spec.name} is missing (shape [${spec.shape.join(', ')}])`)
    if (w.length !== n) {
      throw new CheckpointError(
        `${source}: tensor ${spec.name} has ${w.length} values, shape [${spec.shape.join(', ')}] needs ${n}`,
      )
    }
  }
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i])
}

function json(value: unknown): Uint8Array {
  return Buffer.from(`${JSON.stringify(value, null, 2)}\n`, 'utf8')
}

/** AdamW state as its own safetensors file (moments named `<param>.exp_avg` / `.exp_avg_sq`, step in metadata). */
export function encodeOptimizerState(state: {
  step: number
  tensors: Record<string, Float32Array | Float64Array>
}): Uint8Array {
  const tensors = new Map<string, RawTensor>()
  for (const [name, t] of Object.entries(state.tensors))
    tensors.set(name, fromFloat32(Float32Array.from(t), [t.length]))
  return encodeSafetensors(tensors, { step: String(state.step), format: 'seedflow-adamw' })
}

export function decodeOptimizerState(
  bytes: Uint8Array,
  source = 'optimizer.safetensors',
): { step: number; tensors: Record<string, Float32Array> } {
  const file = decodeSafetensors(bytes, source)
  const step = Number(file.metadata.step)
  if (file.metadata.format !== 'seedflow-adamw' || !Number.isInteger(step)) {
    throw new CheckpointError(
      `${source}: not a seedflow AdamW state (metadata ${JSON.stringify(file.metadata)}); it is written by the update phase`,
    )
  }
  const tensors: Record<string, Float32Array> = {}
  for (const [name, t] of file.tensors) tensors[name] = toFloat32(t, name)
  return { step, tensors }
}
