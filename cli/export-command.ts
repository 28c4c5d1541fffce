// `seedflow export <run>`: copies one checkpoint of a run out of its store into a plain folder (model.safetensors,
// config.json, tokenizer.json, tokenizer_config.json; optimizer state on request) that Hugging Face tools and
// `seedflow eval` read. Every file is streamed through sha256 and checked against what the phase that wrote it
// recorded (the store's own record when no manifest exists), and written under a temporary name first.
import { createHash } from 'node:crypto'
import { createWriteStream } from 'node:fs'
import { mkdir, rename, rm, stat } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { localPaths } from '../infra/local-stack.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { IntegrityError } from '../store/errors.ts'
import { storeFromEnv } from '../store/from-env.ts'
import { CHECKPOINT_FILES } from '../store/keys.ts'
import { formatBytes } from './audit-command.ts'
import { RunInputError, runCheckpoint, runConfigOf } from './run-checkpoint.ts'

export interface ExportOptions {
  iteration?: string
  out: string
  /** Also copy optimizer.safetensors (only the newest checkpoint keeps it by default). */
  optimizer?: boolean
}

export interface ExportedFile {
  file: string
  key: string
  sha256: string
  bytes: number
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  )
}

/** Streams `key` into `path` (via a temporary name), failing with IntegrityError unless its sha256 is `expected`. */
async function copyVerified(store: ArtifactStore, key: string, expected: string, path: string) {
  const hash = createHash('sha256')
  let bytes = 0
  const hashing = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk)
      bytes += chunk.length
      done(null, chunk)
    },
  })
  const partial = `${path}.partial`
  try {
    await pipeline(await store.getStream(key), hashing, createWriteStream(partial, { flags: 'wx' }))
    const actual = hash.digest('hex')
    if (actual !== expected)
      throw new IntegrityError(key, expected, actual, 'not the checkpoint file its phase recorded')
    await rename(partial, path)
  } finally {
    await rm(partial, { force: true })
  }
  return { sha256: expected, bytes }
}

export async function exportCommand(
  runId: string,
  options: ExportOptions,
  io: { out(text: string): void } = { out: (t) => process.stdout.write(t) },
  store: ArtifactStore = storeFromEnv(localPaths().artifacts),
): Promise<ExportedFile[]> {
  const config = await runConfigOf(store, runId)
  const which = options.iteration ?? 'final'
  const checkpoint = await runCheckpoint(store, runId, config, which)
  const out = resolve(options.out)
  const files = CHECKPOINT_FILES.filter((f) => options.optimizer || f !== 'optimizer.safetensors')
  const present: Array<{ file: string; key: string; sha256: string }> = []
  for (const file of files) {
    const key = `${checkpoint.prefix}${file}`
    const head = await store.head(key)
    const recorded = checkpoint.recorded?.[key]
    if (!head) {
      if (recorded || (file === 'optimizer.safetensors' && options.optimizer))
        throw new RunInputError(
          `${key} is missing${recorded ? ` (recorded by ${checkpoint.manifest})` : ''}` +
            (file === 'optimizer.safetensors'
              ? ': retention keeps optimizer state only for the newest checkpoint'
              : ''),
        )
      continue
    }
    present.push({ file, key, sha256: recorded?.sha256 ?? head.sha256 })
  }
  for (const { file } of present) {
    if (await exists(join(out, file)))
      throw new RunInputError(`${join(out, file)} exists already: export into an empty folder`)
  }
  await mkdir(out, { recursive: true })
  const exported: ExportedFile[] = []
  try {
    for (const { file, key, sha256 } of present) {
      const copied = await copyVerified(store, key, sha256, join(out, file))
      exported.push({ file, key, ...copied })
    }
  } catch (error) {
    // half a checkpoint is no checkpoint: take back what this export wrote
    await Promise.all(exported.map((f) => rm(join(out, f.file), { force: true })))
    throw error
  }
  const total = exported.reduce((n, f) => n + f.bytes, 0)
  io.out(
    `seedflow: exported ${which === 'final' ? 'the final checkpoint' : `checkpoint ${which}`} of run ${runId} ` +
      `(${checkpoint.prefix}) to ${out}: ${exported.map((f) => f.file).join(', ')} (${formatBytes(total)}), ` +
      `every sha256 checked against ${checkpoint.manifest ?? "the store's record (no phase manifest records this checkpoint)"}\n`,
  )
  return exported
}
