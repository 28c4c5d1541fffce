import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { ChatTemplate } from './chat-template.ts'
import { type Checkpoint, CheckpointError, weightsFromTensors } from './checkpoint.ts'
import { fromHuggingFaceConfig } from './config.ts'
import { decodeSafetensors, type RawTensor } from './safetensors.ts'
import { TextTokenizer } from './tokenizer.ts'

export interface ImportedModel {
  checkpoint: Checkpoint
  tokenizer: TextTokenizer
  /** The model's own chat template, when tokenizer_config.json has one. */
  chatTemplate?: ChatTemplate
}

async function readJson(path: string, required: boolean): Promise<Record<string, unknown> | undefined> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>
  } catch (error) {
    if (!required && (error as { code?: string }).code === 'ENOENT') return undefined
    throw new CheckpointError(`${path}: ${(error as Error).message}`)
  }
}

/** Every tensor of a single or sharded (model.safetensors.index.json) safetensors checkpoint. */
async function readTensors(dir: string): Promise<Map<string, RawTensor>> {
  const index = await readJson(join(dir, 'model.safetensors.index.json'), false)
  const shards = index
    ? [...new Set(Object.values((index.weight_map ?? {}) as Record<string, string>))].sort()
    : ['model.safetensors']
  const tensors = new Map<string, RawTensor>()
  for (const shard of shards) {
    const path = join(dir, shard)
    const file = decodeSafetensors(await readFile(path), path)
    for (const [name, tensor] of file.tensors) tensors.set(name, tensor)
  }
  return tensors
}

/**
 * Imports a Hugging Face Llama / Qwen2 folder: config.json, safetensors (single or sharded), tokenizer.json,
 * and where present tokenizer_config.json (chat template, special tokens) and generation_config.json
 * (end-of-sequence ids).
 */
export async function importHuggingFaceFolder(dir: string): Promise<ImportedModel> {
  const hf = (await readJson(join(dir, 'config.json'), true)) as Record<string, unknown>
  const config = fromHuggingFaceConfig(hf, join(dir, 'config.json'))
  const weights = weightsFromTensors(config, await readTensors(dir), dir)
  const tokenizerJson = (await readJson(join(dir, 'tokenizer.json'), true)) as object
  const tokenizerConfig = (await readJson(join(dir, 'tokenizer_config.json'), false)) ?? {}
  const generation = (await readJson(join(dir, 'generation_config.json'), false)) ?? {}
  const eosIds = idList(generation.eos_token_id ?? hf.eos_token_id)
  const tokenizer = new TextTokenizer(tokenizerJson, tokenizerConfig, eosIds)
  const checkpoint: Checkpoint = { config, weights, tokenizerJson, eosIds: [...tokenizer.eosIds] }
  const bos = generation.bos_token_id ?? hf.bos_token_id
  if (typeof bos === 'number') checkpoint.bosId = bos
  const imported: ImportedModel = { checkpoint, tokenizer }
  if (typeof tokenizerConfig.chat_template === 'string') {
    imported.chatTemplate = new ChatTemplate(tokenizerConfig.chat_template, {
      ...specialContent('bosToken', tokenizerConfig.bos_token),
      ...specialContent('eosToken', tokenizerConfig.eos_token),
    })
  }
  return imported
}

function idList(value: unknown): number[] {
  if (typeof value === 'number') return [value]
  return Array.isArray(value) ? value.filter((v): v is number => typeof v === 'number') : []
}

function specialContent<K extends string>(key: K, token: unknown): Partial<Record<K, string>> {
  const content = typeof token === 'string' ? token : (token as { content?: unknown } | null)?.content
  return typeof content === 'string' ? ({ [key]: content } as Record<K, string>) : {}
}
