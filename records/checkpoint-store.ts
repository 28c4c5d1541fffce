import {
  type Checkpoint,
  decodeCheckpoint,
  decodeOptimizerState,
  encodeCheckpoint,
  encodeOptimizerState,
} from '../policy/checkpoint.ts'
import type { ArtifactStore, ObjectInfo } from '../store/artifact-store.ts'
import { CHECKPOINT_FILES, type CheckpointFile } from '../store/keys.ts'
import type { CheckpointRef } from './contracts.ts'

export interface OptimizerState {
  step: number
  tensors: Record<string, Float32Array | Float64Array>
}

/**
 * Writes a checkpoint folder under `prefix` (ending in '/'): model.safetensors, config.json, tokenizer.json
 * and, when given, optimizer.safetensors. Returns what the store recorded for each file.
 */
export async function putCheckpoint(
  store: ArtifactStore,
  prefix: string,
  checkpoint: Checkpoint,
  optimizer?: OptimizerState,
): Promise<Partial<Record<CheckpointFile, ObjectInfo>>> {
  if (!prefix.endsWith('/')) throw new RangeError(`checkpoint prefix must end with '/': ${prefix}`)
  const files = encodeCheckpoint(checkpoint)
  if (optimizer) files['optimizer.safetensors'] = encodeOptimizerState(optimizer)
  const written: Partial<Record<CheckpointFile, ObjectInfo>> = {}
  for (const [file, bytes] of Object.entries(files) as Array<[CheckpointFile, Uint8Array]>) {
    written[file] = await store.put(`${prefix}${file}`, bytes)
  }
  return written
}

/** Writes a checkpoint folder (putCheckpoint); the reference names the folder and the weights' sha256. */
export async function saveCheckpoint(
  store: ArtifactStore,
  prefix: string,
  checkpoint: Checkpoint,
  optimizer?: OptimizerState,
): Promise<CheckpointRef> {
  const written = await putCheckpoint(store, prefix, checkpoint, optimizer)
  return { prefix, sha256: written['model.safetensors']?.sha256 ?? '' }
}

/** Reads (and verifies) a checkpoint folder; the optimizer state when the folder has one. */
export async function loadCheckpoint(
  store: ArtifactStore,
  ref: CheckpointRef,
): Promise<{ checkpoint: Checkpoint; optimizer?: OptimizerState }> {
  const files: Partial<Record<CheckpointFile, Uint8Array>> = {}
  for (const file of CHECKPOINT_FILES) {
    if (file === 'model.safetensors' || file === 'config.json' || (await store.head(`${ref.prefix}${file}`))) {
      files[file] = await store.get(`${ref.prefix}${file}`)
    }
  }
  const checkpoint = decodeCheckpoint(files, ref.prefix)
  const optimizerBytes = files['optimizer.safetensors']
  return optimizerBytes
    ? { checkpoint, optimizer: decodeOptimizerState(optimizerBytes, `${ref.prefix}optimizer.safetensors`) }
    : { checkpoint }
}
