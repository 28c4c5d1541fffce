// `seedflow config`: a preset's full run configuration as JSON, to edit and pass to `seedflow run <file>` or, as
// the workflow input `{ runId, config }`, to `temporal workflow start --type seedRun --input-file`.
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fromHuggingFaceConfig } from '../policy/config.ts'
import { ALGORITHM_NAMES, type AlgorithmName } from '../seed/algorithms.ts'
import { RUN_ENV_NAMES, type RunConfig, type RunEnvName } from '../seed/config.ts'
import { cpuSokobanPreset } from '../seed/presets/cpu.ts'
import { paperPreset } from '../seed/presets/paper.ts'
import { smokeSokobanPreset } from '../seed/presets/smoke.ts'
import { cpuHouseholdSmollm2Preset } from '../seed/presets/smollm2.ts'
import { assertValidRunId } from '../store/keys.ts'

export const PRESET_NAMES = [
  'cpu-sokoban',
  'smoke-sokoban',
  'cpu-household-smollm2',
  ...RUN_ENV_NAMES.map((env) => `paper-${env}`),
] as const

export interface ConfigOptions {
  algorithm: string
  modelFolder?: string
  runId?: string
}

function preset(name: string, algorithm: AlgorithmName, folder: string | undefined): RunConfig {
  if (name === 'cpu-sokoban') return cpuSokobanPreset(algorithm)
  if (name === 'smoke-sokoban') return smokeSokobanPreset(algorithm)
  if (name === 'cpu-household-smollm2') {
    if (!folder)
      throw new Error(`preset ${name} trains SmolLM2-135M-Instruct: give its folder with --model-folder <dir>`)
    return cpuHouseholdSmollm2Preset(resolve(folder), algorithm)
  }
  const env = name.replace(/^paper-/, '') as RunEnvName
  if (!name.startsWith('paper-') || !RUN_ENV_NAMES.includes(env))
    throw new Error(`unknown preset ${JSON.stringify(name)}; one of ${PRESET_NAMES.join(', ')}`)
  if (!folder) throw new Error(`preset ${name} trains an imported model: give its folder with --model-folder <dir>`)
  return paperPreset(env, resolve(folder), algorithm, folderPositions(folder))
}

/** The folder's max_position_embeddings (the preset's context is capped to it); the paper's when unreadable. */
function folderPositions(folder: string): number | undefined {
  try {
    const hf = JSON.parse(readFileSync(join(folder, 'config.json'), 'utf8')) as Record<string, unknown>
    return fromHuggingFaceConfig(hf, join(folder, 'config.json')).maxPositions
  } catch (error) {
    process.stderr.write(`seedflow: ${(error as Error).message}; the preset keeps the paper's context\n`)
    return undefined
  }
}

export function configCommand(name: string, options: ConfigOptions): void {
  if (!(ALGORITHM_NAMES as string[]).includes(options.algorithm))
    throw new Error(`unknown algorithm ${JSON.stringify(options.algorithm)}; one of ${ALGORITHM_NAMES.join(', ')}`)
  const config = preset(name, options.algorithm as AlgorithmName, options.modelFolder)
  if (options.runId !== undefined) assertValidRunId(options.runId)
  const out = options.runId === undefined ? config : { runId: options.runId, config }
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
}
