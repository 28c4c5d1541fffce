// `seedflow import <file.gguf>`: a GGUF file (llama.cpp's format) read into a seedflow checkpoint, float32 weights
// under Hugging Face names, so that it is written as a folder both seedflow and transformers read.
import { mkdir, rename, rm, writeFile } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { ChatTemplate } from '../chat-template.ts'
import { type Checkpoint, checkWeights, encodeCheckpoint } from '../checkpoint.ts'
import type { ModelConfig } from '../config.ts'
import type { ImportedModel } from '../hf-import.ts'
import { parameterSpecs } from '../parameters.ts'
import { TextTokenizer } from '../tokenizer.ts'
import { ggufModelConfig } from './gguf-config.ts'
import { GgufError } from './gguf-error.ts'
import { checkSupported, openGguf } from './gguf-file.ts'
import { ggufTokenizer } from './gguf-tokenizer.ts'

/** llama.cpp's per-layer tensor names and the Hugging Face module each is. */
const LAYER_TENSORS: Record<string, string> = {
  attn_norm: 'input_layernorm',
  attn_q: 'self_attn.q_proj',
  attn_k: 'self_attn.k_proj',
  attn_v: 'self_attn.v_proj',
  attn_output: 'self_attn.o_proj',
  ffn_norm: 'post_attention_layernorm',
  ffn_gate: 'mlp.gate_proj',
  ffn_up: 'mlp.up_proj',
  ffn_down: 'mlp.down_proj',
}
const GLOBAL_TENSORS: Record<string, string> = {
  'token_embd.weight': 'model.embed_tokens.weight',
  'output_norm.weight': 'model.norm.weight',
  'output.weight': 'lm_head.weight',
}

/** The Hugging Face name of a GGUF tensor, or undefined when seedflow's model has no such tensor. */
export function huggingFaceName(name: string): string | undefined {
  const global = GLOBAL_TENSORS[name]
  if (global) return global
  const m = /^blk\.(\d+)\.([a-z_]+)\.(weight|bias)$/.exec(name)
  const module = m ? LAYER_TENSORS[m[2] as string] : undefined
  return m && module ? `model.layers.${m[1]}.${module}.${m[3]}` : undefined
}

/**
 * Undoes the row order llama.cpp's converter gives a Llama's q and k projections: it interleaves each head's two
 * rotary halves (row h·D + 2i + s holds Hugging Face row h·D + s·D/2 + i), to suit its own rotary kernel.
 */
export function unpermuteRows(values: Float32Array, heads: number, rowLength: number): Float32Array {
  const rows = values.length / rowLength
  const D = rows / heads
  const half = D / 2
  const out = new Float32Array(values.length)
  for (let h = 0; h < heads; h++)
    for (let s = 0; s < 2; s++)
      for (let i = 0; i < half; i++) {
        const from = (h * D + 2 * i + s) * rowLength
        out.set(values.subarray(from, from + rowLength), (h * D + s * half + i) * rowLength)
      }
  return out
}

function permutedHeads(config: ModelConfig, name: string): number | undefined {
  if (config.family !== 'llama') return undefined // llama.cpp permutes Llama's q/k only
  if (/\.self_attn\.q_proj\./.test(name)) return config.numHeads
  if (/\.self_attn\.k_proj\./.test(name)) return config.numKvHeads
  return undefined
}

export interface GgufImportProgress {
  tensor: string
  done: number
  total: number
}

/** Reads a GGUF file: config, float32 weights under Hugging Face names, tokenizer and chat template. */
export async function importGguf(
  path: string,
  onProgress?: (p: GgufImportProgress) => void,
): Promise<ImportedModel & { architecture: string; types: Record<string, number> }> {
  const source = resolve(path)
  const file = await openGguf(source)
  try {
    const config = ggufModelConfig(file.metadata, file.tensors, source)
    const tokenizer = ggufTokenizer(file.metadata, source)
    if (typeof tokenizer.tokenizerConfig.chat_template !== 'string')
      throw new GgufError(
        `${source}: the file has no chat template (tokenizer.chat_template); seedflow builds every prompt with it`,
      )
    const specs = new Map(parameterSpecs(config).map((s) => [s.name, s]))
    for (const t of file.tensors) {
      const name = huggingFaceName(t.name)
      if (!name || !specs.has(name))
        throw new GgufError(`${source}: tensor ${t.name} is not part of a ${config.family} model with this config`)
      const expected = specs.get(name)?.shape ?? []
      const shape = [...t.shape].reverse()
      if (shape.length !== expected.length || shape.some((d, i) => d !== expected[i]))
        throw new GgufError(
          `${source}: tensor ${t.name} has shape [${shape.join(', ')}] but the config expects [${expected.join(', ')}]`,
        )
    }
    checkSupported(file.tensors)
    const weights = new Map<string, Float32Array>()
    const types: Record<string, number> = {}
    for (const [i, t] of file.tensors.entries()) {
      const name = huggingFaceName(t.name) as string
      const values = await file.read(t.name)
      const heads = permutedHeads(config, name)
      weights.set(name, heads ? unpermuteRows(values, heads, t.shape.length > 1 ? (t.shape[0] as number) : 1) : values)
      types[t.typeName] = (types[t.typeName] ?? 0) + 1
      onProgress?.({ tensor: t.name, done: i + 1, total: file.tensors.length })
    }
    checkWeights(config, weights, source)
    const checkpoint: Checkpoint = {
      config,
      weights,
      tokenizerJson: tokenizer.tokenizerJson,
      tokenizerConfig: tokenizer.tokenizerConfig,
      eosIds: tokenizer.eosIds,
    }
    if (tokenizer.bosId !== undefined) checkpoint.bosId = tokenizer.bosId
    const specials = (key: string) => tokenizer.tokenizerConfig[key] as string | undefined
    const bosToken = specials('bos_token')
    const eosToken = specials('eos_token')
    return {
      checkpoint,
      tokenizer: new TextTokenizer(tokenizer.tokenizerJson, tokenizer.tokenizerConfig, tokenizer.eosIds),
      chatTemplate: new ChatTemplate(tokenizer.tokenizerConfig.chat_template as string, {
        ...(bosToken ? { bosToken } : {}),
        ...(eosToken ? { eosToken } : {}),
      }),
      architecture: String(file.metadata['general.architecture']),
      types,
    }
  } finally {
    await file.close()
  }
}

/**
 * Writes a checkpoint as a Hugging Face folder (model.safetensors in float32, config.json, tokenizer.json,
 * tokenizer_config.json with the chat template, generation_config.json with the end-of-sequence ids): written
 * beside the target and renamed at the end, so a failed write never leaves a half folder under its name.
 */
export async function writeCheckpointFolder(dir: string, checkpoint: Checkpoint): Promise<string[]> {
  const target = resolve(dir)
  const files: Record<string, Uint8Array> = { ...(encodeCheckpoint(checkpoint) as Record<string, Uint8Array>) }
  const generation = {
    ...(checkpoint.bosId === undefined ? {} : { bos_token_id: checkpoint.bosId }),
    eos_token_id: checkpoint.eosIds.length === 1 ? checkpoint.eosIds[0] : checkpoint.eosIds,
  }
  files['generation_config.json'] = Buffer.from(`${JSON.stringify(generation, null, 2)}\n`)
  const temporary = join(dirname(target), `.${basename(target)}.partial-${process.pid}`)
  await rm(temporary, { recursive: true, force: true })
  await mkdir(temporary, { recursive: true })
  try {
    for (const [name, bytes] of Object.entries(files)) await writeFile(join(temporary, name), bytes)
    await rename(temporary, target)
  } catch (error) {
    await rm(temporary, { recursive: true, force: true })
    throw error
  }
  return Object.keys(files).sort()
}
