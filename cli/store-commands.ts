// The commands that read a run's store without a Temporal server: `audit` and `export`.
import type { Command } from 'commander'
import { auditCommand } from './audit-command.ts'
import { type ExportOptions, exportCommand } from './export-command.ts'

export function registerStoreCommands(program: Command): void {
  program
    .command('audit')
    .description(
      "verify a run without a Temporal server: re-hash every artifact its manifests record and check every lineage link, in the run's store (SEEDFLOW_S3_* or the local folder); exits 1 naming the first broken one, tells pruned from broken",
    )
    .argument('<run>', 'run id')
    .action(async (runId: string) => {
      await auditCommand(runId)
    })

  program
    .command('export')
    .description(
      "copy a run's checkpoint out of its store into a plain folder (model.safetensors, config.json, tokenizer.json), checking every sha256; a checkpoint pruned by retention is refused",
    )
    .argument('<run>', 'run id')
    .option('--iteration <k>', 'iteration k (the checkpoint it wrote), base, stage1 or final', 'final')
    .requiredOption('--out <dir>', 'the folder to write (created; files already there are not overwritten)')
    .option('--optimizer', 'also copy optimizer.safetensors (kept only for the newest checkpoint)')
    .action(async (runId: string, options: ExportOptions) => {
      await exportCommand(runId, options)
    })
}
