// `seedflow export <run>`: copies one checkpoint of a run out of its store into a plain folder (model.safetensors,
// config.json, tokenizer.json, tokenizer_config.json; optimizer state on request) that Hugging Face tools and
// `seedflow eval` read. Every file is streamed through sha256 and checked against what the phase that wrote it
// recorded (the store's own record when no manifest exists).
//
// The output folder appears whole or not at all: the files are written into a temporary folder next to it
// (`.<name>.partial-<pid>-<random>`, same parent) and only once every one is verified is that folder renamed to
// the target. A target that exists already (empty, or holding other files) is kept: the export refuses it when a
// checkpoint file would be overwritten, and otherwise links the verified files into it at the end. A failed
// export removes its temporary folder (and parent folders it created), leaves a pre-existing target as it was
// and never leaves an empty or partial target behind.
import { createHash } from 'node:crypto'
import { constants, createWriteStream } from 'node:fs'
import { copyFile, link, mkdir, mkdtemp, rename, rm, rmdir, stat } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { localPaths } from '../infra/local-stack.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { IntegrityError } from '../store/errors.ts'
import { storeFromEnv } from '../store/from-env.ts'
import { CHECKPOINT_FILES } from '../store/keys.ts'
import { formatBytes } from './audit-command.ts'
import { RunInputError, recordedRunConfig, runCheckpoint } from './run-checkpoint.ts'

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

/** Streams `key` into a new file `path`, failing with IntegrityError unless its sha256 is `expected`. */
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
  await mkdir(dirname(path), { recursive: true }) // a LoRA checkpoint's adapter/ folder
  await pipeline(await store.getStream(key), hashing, createWriteStream(path, { flags: 'wx' }))
  const actual = hash.digest('hex')
  if (actual !== expected) throw new IntegrityError(key, expected, actual, 'not the checkpoint file its phase recorded')
  return { sha256: expected, bytes }
}

const errorCode = (error: unknown) => (error as { code?: string }).code

const occupied = (path: string) =>
  new RunInputError(`${path} exists already: export into an empty folder (or one without the checkpoint's files)`)

/** Places `files` of folder `from` into the existing folder `to` without overwriting anything, or none of them. */
async function placeInto(from: string, to: string, files: string[]): Promise<void> {
  const placed: string[] = []
  try {
    for (const file of files) {
      const target = join(to, file)
      await mkdir(dirname(target), { recursive: true })
      try {
        // link (and copyFile with COPYFILE_EXCL across filesystems) fails on an existing target, never replaces it
        await link(join(from, file), target).catch((error) =>
          errorCode(error) === 'EXDEV'
            ? copyFile(join(from, file), target, constants.COPYFILE_EXCL)
            : Promise.reject(error),
        )
      } catch (error) {
        throw errorCode(error) === 'EEXIST' ? occupied(target) : error
      }
      placed.push(target)
    }
  } catch (error) {
    await Promise.all(placed.map((path) => rm(path, { force: true })))
    throw error
  }
}

/** Removes `dir` and its parents up to `top` (the first folder `mkdir -p` created), as long as they are empty. */
async function removeCreated(dir: string, top: string): Promise<void> {
  for (let d = dir; d.length >= top.length; d = dirname(d)) {
    const removed = await rmdir(d).then(
      () => true,
      () => false,
    )
    if (!removed || d === top) return
  }
}

export async function exportCommand(
  runId: string,
  options: ExportOptions,
  io: { out(text: string): void } = { out: (t) => process.stdout.write(t) },
  store: ArtifactStore = storeFromEnv(localPaths().artifacts),
): Promise<ExportedFile[]> {
  const config = await recordedRunConfig(store, runId)
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
  const target = await stat(out).catch(() => undefined)
  if (target && !target.isDirectory())
    throw new RunInputError(`${out} exists and is not a folder: export into a folder`)
  if (target) {
    for (const { file } of present) if (await exists(join(out, file))) throw occupied(join(out, file))
  }
  const parent = dirname(out)
  const createdParent = await mkdir(parent, { recursive: true })
  const exported: ExportedFile[] = []
  let partial: string | undefined
  try {
    partial = await mkdtemp(join(parent, `.${basename(out)}.partial-${process.pid}-`))
    for (const { file, key, sha256 } of present) {
      const copied = await copyVerified(store, key, sha256, join(partial, file))
      exported.push({ file, key, ...copied })
    }
    if (target) {
      await placeInto(
        partial,
        out,
        exported.map((f) => f.file),
      )
      await rm(partial, { recursive: true, force: true })
    } else {
      await rename(partial, out).catch((error) => {
        // another process made the folder meanwhile (a rename onto an empty folder replaces it)
        throw ['ENOTEMPTY', 'EEXIST', 'ENOTDIR'].includes(errorCode(error) ?? '')
          ? new RunInputError(`${out} was created by someone else during the export: export into an empty folder`)
          : error
      })
    }
  } catch (error) {
    // half a checkpoint is no checkpoint: nothing of this export stays behind
    if (partial) await rm(partial, { recursive: true, force: true })
    if (createdParent) await removeCreated(parent, createdParent)
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
