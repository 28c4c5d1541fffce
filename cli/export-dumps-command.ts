// `seedflow export-dumps <run> --format <format>`: a run's per-step dumps in another trainer's layout, for
// comparing runs across implementations, read from the run's store (the local folder by default, S3 through
// SEEDFLOW_S3_* as the other commands) without a Temporal server. One exporter per format in DUMP_FORMATS.

import { exportTensorBoard } from '../exports/tensorboard-run.ts'
import { exportVerlDumps } from '../exports/verl-dumps.ts'
import { localPaths } from '../infra/local-stack.ts'
import { UnknownRunError } from '../records/audit.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { storeFromEnv } from '../store/from-env.ts'
import { InvalidRunIdError } from '../store/keys.ts'
import { RunInputError } from './run-checkpoint.ts'

type DumpExporter = (
  store: ArtifactStore,
  runId: string,
  outDir: string,
  opts: { onProgress?: (msg: string) => void },
) => Promise<{ files: string[]; iterations: number }>

/**
 * `verl`: the reference SEED implementation's rollout and analysis dumps (exports/verl-dumps.ts); `tensorboard`:
 * the run's scalar metrics and evaluations as a TensorBoard event file (exports/tensorboard-run.ts).
 */
export const DUMP_FORMATS = {
  verl: exportVerlDumps,
  tensorboard: exportTensorBoard,
} as const satisfies Record<string, DumpExporter>

export type DumpFormat = keyof typeof DUMP_FORMATS

export interface ExportDumpsOptions {
  format: string
  /** Default: `./<runId>-dumps`. */
  out?: string
}

export async function exportDumpsCommand(
  runId: string,
  options: ExportDumpsOptions,
  io: { out(text: string): void } = { out: (t) => process.stdout.write(t) },
  store: ArtifactStore = storeFromEnv(localPaths().artifacts),
): Promise<{ files: string[]; iterations: number }> {
  if (!Object.hasOwn(DUMP_FORMATS, options.format)) {
    throw new RunInputError(
      `unknown dump format ${JSON.stringify(options.format)}: known formats are ${Object.keys(DUMP_FORMATS).join(', ')}`,
    )
  }
  const exporter: DumpExporter = DUMP_FORMATS[options.format as DumpFormat]
  const out = options.out ?? `./${runId}-dumps`
  let result: { files: string[]; iterations: number }
  try {
    result = await exporter(store, runId, out, { onProgress: (msg) => io.out(`${msg}\n`) })
  } catch (error) {
    if (error instanceof UnknownRunError || error instanceof InvalidRunIdError)
      throw new RunInputError((error as Error).message)
    throw error
  }
  io.out(
    `seedflow: exported ${result.iterations} iteration(s) of run ${runId} as ${options.format} dumps into ${out}: ${result.files.length} file(s)\n`,
  )
  for (const file of result.files) io.out(`  ${file}\n`)
  return result
}
