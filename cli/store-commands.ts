// The commands that read a run's store without needing a Temporal server: `audit`, `export`, `export-dumps`,
// `report` and `ui` (the last two ask Temporal for each run's state when one answers), and `store reindex`.
import { type Command, InvalidArgumentError } from 'commander'
import { auditCommand } from './audit-command.ts'
import { parsePort } from './env-command.ts'
import { type ExportOptions, exportCommand } from './export-command.ts'
import { DUMP_FORMATS, type ExportDumpsOptions, exportDumpsCommand } from './export-dumps-command.ts'
import { reindexCommand } from './reindex-command.ts'
import { type ReportOptions, reportCommand } from './report-command.ts'
import { type UiCommandOptions, uiCommand } from './ui-command.ts'

function count(value: string): number {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1 || n > 100_000)
    throw new InvalidArgumentError(`not an integer in 1..100000: ${value}`)
  return n
}

function iterationList(value: string): number[] {
  const list = value.split(',').map((s) => Number(s.trim()))
  if (list.some((n) => !Number.isInteger(n) || n < 0 || n > 9999))
    throw new InvalidArgumentError(`not a comma-separated list of iterations (0..9999): ${value}`)
  return list
}

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
    .command('store')
    .description('maintain the artifact store itself')
    .command('reindex')
    .description(
      "after a folder store was copied, restored or moved: read every file's checksum record once (a copy's files have new inodes, so the first read of each hashes it) and list any file that no record vouches for; exits 1 when there is one",
    )
    .action(async () => {
      await reindexCommand()
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

  program
    .command('export-dumps')
    .description(
      "write a run's data in the formats peers read, from its store: verl (the reference SEED implementation's {step}.jsonl rollout dumps and seed_analysis/step_{step:08d}.jsonl analyzer records, step = iteration + 1) or tensorboard (its scalar metrics and evaluations as an event file)",
    )
    .argument('<run>', 'run id')
    .requiredOption('--format <format>', Object.keys(DUMP_FORMATS).join(' | '))
    .option('--out <dir>', 'the folder to write (default: ./<run>-dumps); files of the same names are replaced')
    .action(async (runId: string, options: ExportDumpsOptions) => {
      await exportDumpsCommand(runId, options)
    })

  program
    .command('report')
    .description(
      'write the HTML report of a run (or of several, side by side) from its stored artifacts: curves, losses, OPD gate, parse rate, teacher gaps, time per phase, per-family table, and a skill inspection page per iteration with tokens coloured by the skill-induced shift; works for finished, running and failed runs and opens offline',
    )
    .argument('<runs...>', 'run ids')
    .option('--out <dir>', 'the folder to write (default: ./report-<runs>)')
    .option('--open', 'open the report in the desktop browser')
    .option('--trajectories <n>', 'trajectories per skill page (evenly spaced beyond it)', count, 32)
    .option(
      '--iterations <list>',
      'only these iterations get a skill page, e.g. 0,5,11 (default: all still stored)',
      iterationList,
    )
    .action(async (runIds: string[], options: ReportOptions) => {
      await reportCommand(runIds, options)
    })

  program
    .command('ui')
    .description(
      "serve the report pages of every run in the store on a local web server (a running run's page reloads itself); links to the Temporal Web UI",
    )
    .option('--port <port>', 'port (0 = any free one)', parsePort, 8300)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--trajectories <n>', 'trajectories per skill page', count, 32)
    .option('--refresh <seconds>', "reload a running run's page this often", count, 10)
    .action(async (options: UiCommandOptions) => {
      await uiCommand(options)
    })
}
