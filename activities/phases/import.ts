// Import: an imported model's base checkpoint (the run's `prepare` when its model is a Hugging Face folder): the
// folder read on this worker and stored as the run's base (float32 weights, config, tokenizer and
// tokenizer_config.json with the chat template). The folder's file hashes are the phase's inputs. Without a
// warm-start the model starts from its own weights; with one, the warm-start phase reads the folder the same way
// (`folderHashes`, `readImportedFolder`) and stores the cloned model as the base instead.
import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { stat } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { pipeline as streamPipeline } from 'node:stream/promises'
import { ApplicationFailure } from '@temporalio/common'
import { checkpointCodec } from '../../compute/index.ts'
import type { Checkpoint } from '../../policy/checkpoint.ts'
import { huggingFaceFolderFiles, importHuggingFaceFolder } from '../../policy/hf-import.ts'
import type { RunRef, StageSummary } from '../../records/contracts.ts'
import { fatal } from '../../records/failures.ts'
import type { ImportedModelConfig, RunConfig } from '../../seed/config.ts'
import { keys } from '../../store/keys.ts'
import { type PhaseDef, scopeOf } from '../phase-activity.ts'
import { checkpointOf, MODEL_FILE, writeCheckpoint } from '../phase-io.ts'

async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256')
  await streamPipeline(createReadStream(path), hash)
  return hash.digest('hex')
}

/**
 * The sha256 of every file an import of `folder` reads (by file name): the inputs of the import phase, so a
 * changed folder is a different input. A missing or unreadable folder or file fails for good, naming the path.
 */
export async function folderHashes(folder: string): Promise<Record<string, string>> {
  const unreadable = (path: string, error: unknown) =>
    fatal(`model.folder ${folder}: cannot read ${path} (${(error as Error).message})`, 'ModelImportError')
  try {
    if (!(await stat(folder)).isDirectory())
      throw fatal(
        `model.folder ${folder} is not a folder (it needs config.json, model.safetensors, tokenizer.json)`,
        'ModelImportError',
      )
  } catch (error) {
    if (error instanceof ApplicationFailure) throw error
    throw unreadable(folder, error)
  }
  let files: string[]
  try {
    files = await huggingFaceFolderFiles(folder)
  } catch (error) {
    throw unreadable(join(folder, 'model.safetensors.index.json'), error)
  }
  const hashes: Record<string, string> = {}
  for (const file of files) {
    const path = join(folder, file)
    try {
      hashes[`folder/${file}`] = await sha256File(path)
    } catch (error) {
      throw unreadable(path, error)
    }
  }
  return hashes
}

/**
 * The folder's checkpoint as a run starts from it: imported, its chat template checked, its context at least the
 * run's `model.maxPositions`; failures are fatal (ModelImportError, InvalidRunConfig), naming the folder.
 */
export async function readImportedFolder(model: ImportedModelConfig): Promise<Checkpoint> {
  const folder = resolve(model.folder)
  let imported: Awaited<ReturnType<typeof importHuggingFaceFolder>>
  try {
    imported = await importHuggingFaceFolder(folder)
    checkpointCodec(imported.checkpoint) // every phase needs prompts: a template the tokenizer cannot encode fails here
  } catch (error) {
    throw fatal(`model.folder ${folder}: ${(error as Error).message}`, 'ModelImportError')
  }
  const c = imported.checkpoint.config
  if (model.maxPositions > c.maxPositions) {
    throw fatal(
      `model.maxPositions: ${model.maxPositions} exceeds the max_position_embeddings ${c.maxPositions} of ${join(folder, 'config.json')}`,
      'InvalidRunConfig',
    )
  }
  return imported.checkpoint
}

const needs = (c: RunConfig) => c.model as ImportedModelConfig

export const importPhase: PhaseDef<{ run: RunRef }, ImportedModelConfig, StageSummary> = {
  describe: () => 'prepare',
  needs,
  async plan({ run }, model) {
    return {
      scope: scopeOf(run, 'import', 0),
      inputs: await folderHashes(resolve(model.folder)),
      async compute({ store, attempt }) {
        const checkpoint = await readImportedFolder(model)
        const c = checkpoint.config
        const key = keys.baseCheckpoint(run.runId, MODEL_FILE, attempt)
        const outputs = await writeCheckpoint(store, key, checkpoint)
        const parameters = [...checkpoint.weights.values()].reduce((n, w) => n + w.length, 0)
        return {
          outputs,
          stats: { parameters, vocabSize: c.vocabSize, maxPositions: c.maxPositions },
        }
      },
    }
  },
  result: (summary, outputs) => ({ ...summary, checkpoint: checkpointOf(outputs, 'prepare') }),
}
