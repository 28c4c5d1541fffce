import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { type ChatTemplate, chatTemplateOf } from './chat-template.ts'
import { BUILTIN_PROMPTS_KEY, type Checkpoint, CheckpointError, weightsFromTensors } from './checkpoint.ts'
import { fromHuggingFaceConfig } from './config.ts'
import { decodeSafetensors, type RawTensor } from './safetensors.ts'
import { TextTokenizer } from './tokenizer.ts'

export interface ImportedModel {
  checkpoint: Checkpoint
  tokenizer: TextTokenizer
  /** The model's chat template; undefined only for a seedflow built-in model's checkpoint (plain prompts). */
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

const INDEX_FILE = 'model.safetensors.index.json'
/**
 * Files read when present; config.json, tokenizer.json and the weights are required. transformers ≥ 5 writes the
 * chat template to chat_template.jinja instead of tokenizer_config.json's `chat_template`.
 */
const OPTIONAL_FILES = ['tokenizer_config.json', 'chat_template.jinja', 'generation_config.json'] as const

/** The weight files: the shards an index names (sorted), else the single model.safetensors. */
async function weightFiles(dir: string): Promise<string[]> {
  const index = await readJson(join(dir, INDEX_FILE), false)
  return index
    ? [...new Set(Object.values((index.weight_map ?? {}) as Record<string, string>))].sort()
    : ['model.safetensors']
}

/**
 * The files of a folder that `importHuggingFaceFolder` reads, by name relative to the folder: what identifies
 * an import (a pipeline hashes them to tell a changed folder from the same one). Optional files are listed only
 * when present; required ones always (reading a missing one fails the import with its path).
 */
export async function huggingFaceFolderFiles(dir: string): Promise<string[]> {
  const present = async (name: string) => {
    try {
      return (await stat(join(dir, name))).isFile()
    } catch {
      return false
    }
  }
  const files = ['config.json', 'tokenizer.json']
  for (const name of [INDEX_FILE, ...OPTIONAL_FILES]) if (await present(name)) files.push(name)
  return [...files, ...(await weightFiles(dir))]
}

/** Every tensor of a single or sharded (model.safetensors.index.json) safetensors checkpoint. */
async function readTensors(dir: string): Promise<Map<string, RawTensor>> {
  const shards = await weightFiles(dir)
  const tensors = new Map<string, RawTensor>()
  for (const shard of shards) {
    const path = join(dir, shard)
    const file = decodeSafetensors(await readFile(path), path)
    for (const [name, tensor] of file.tensors) tensors.set(name, tensor)
  }
  return tensors
}

async function readText(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8')
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return undefined
    throw new CheckpointError(`${path}: ${(error as Error).message}`)
  }
}

/**
 * Imports a Hugging Face Llama / Qwen2 folder: config.json, safetensors (single or sharded), tokenizer.json,
 * the chat template (chat_template.jinja, else tokenizer_config.json's `chat_template`), and where present
 * tokenizer_config.json (special tokens) and generation_config.json (end-of-sequence ids). The template is kept
 * in the checkpoint's tokenizer_config, so seedflow's own checkpoints and exports carry it. A folder without a
 * chat template is refused, unless it is a seedflow built-in model's checkpoint (plain prompts).
 */
export async function importHuggingFaceFolder(dir: string): Promise<ImportedModel> {
  const hf = (await readJson(join(dir, 'config.json'), true)) as Record<string, unknown>
  const config = fromHuggingFaceConfig(hf, join(dir, 'config.json'))
  const weights = weightsFromTensors(config, await readTensors(dir), dir)
  const tokenizerJson = (await readJson(join(dir, 'tokenizer.json'), true)) as object
  const tokenizerConfigFile = await readJson(join(dir, 'tokenizer_config.json'), false)
  const templateFile = await readText(join(dir, 'chat_template.jinja'))
  const tokenizerConfig: Record<string, unknown> | undefined =
    templateFile === undefined ? tokenizerConfigFile : { ...tokenizerConfigFile, chat_template: templateFile }
  const chatTemplate = chatTemplateOf(tokenizerConfig)
  if (!chatTemplate && hf[BUILTIN_PROMPTS_KEY] !== true)
    throw new CheckpointError(
      `${dir}: the model has no chat template (neither chat_template.jinja nor a chat_template in ` +
        'tokenizer_config.json); seedflow builds every prompt with it, so add the template the model was trained with',
    )
  const generation = (await readJson(join(dir, 'generation_config.json'), false)) ?? {}
  const eosIds = idList(generation.eos_token_id ?? hf.eos_token_id)
  const tokenizer = new TextTokenizer(tokenizerJson, tokenizerConfig ?? {}, eosIds)
  const checkpoint: Checkpoint = { config, weights, tokenizerJson, eosIds: [...tokenizer.eosIds] }
  if (tokenizerConfig) checkpoint.tokenizerConfig = tokenizerConfig
  const bos = generation.bos_token_id ?? hf.bos_token_id
  if (typeof bos === 'number') checkpoint.bosId = bos
  const imported: ImportedModel = { checkpoint, tokenizer }
  if (chatTemplate) imported.chatTemplate = chatTemplate
  return imported
}

function idList(value: unknown): number[] {
  if (typeof value === 'number') return [value]
  return Array.isArray(value) ? value.filter((v): v is number => typeof v === 'number') : []
}
