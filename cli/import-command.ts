import { stat } from 'node:fs/promises'
import { resolve } from 'node:path'
import { importGguf, writeCheckpointFolder } from '../policy/gguf/gguf-import.ts'
import { importHuggingFaceFolder } from '../policy/hf-import.ts'
import { parameterCount } from '../policy/parameters.ts'
import { RunInputError } from './run-checkpoint.ts'

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch {
    return false
  }
}

/**
 * `seedflow import <file.gguf | folder> --out <folder>`: a llama.cpp GGUF file (or a Hugging Face folder) written as
 * a checkpoint folder that seedflow and transformers read: float32 model.safetensors, config.json, tokenizer.json,
 * tokenizer_config.json with the chat template, generation_config.json.
 */
export async function importCommand(source: string, options: { out: string }): Promise<void> {
  const out = resolve(options.out)
  if (await exists(out)) throw new RunInputError(`${out} already exists; give a new folder with --out`)
  if (!(await exists(source))) throw new RunInputError(`no such file or folder: ${source}`)
  const started = performance.now()
  const isFolder = (await stat(source)).isDirectory()
  let last = 0
  const imported = isFolder
    ? { ...(await importHuggingFaceFolder(source)), architecture: 'hugging face folder', types: { float: 1 } }
    : await importGguf(source, ({ done, total }) => {
        const now = performance.now()
        if (process.stderr.isTTY && (now - last > 200 || done === total)) {
          last = now
          process.stderr.write(`\rdequantizing tensors ${done}/${total}${done === total ? '\n' : ''}`)
        }
      })
  const files = await writeCheckpointFolder(out, imported.checkpoint)
  const c = imported.checkpoint.config
  const types = Object.entries(imported.types)
    .map(([t, n]) => `${n} ${t}`)
    .join(', ')
  process.stdout.write(
    `imported ${resolve(source)} (${imported.architecture}${isFolder ? '' : `; tensors ${types}`})\n` +
      `  model    ${c.family}, ${c.numLayers} layers, d ${c.hiddenSize}, ${c.numHeads}/${c.numKvHeads} heads, ` +
      `vocabulary ${c.vocabSize}, ${(parameterCount(c) / 1e6).toFixed(1)}M parameters (float32)\n` +
      `  wrote    ${out}: ${files.join(', ')}\n` +
      `  in       ${((performance.now() - started) / 1000).toFixed(1)} s\n`,
  )
}
