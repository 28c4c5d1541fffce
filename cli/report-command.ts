// `seedflow report <run> [<run> …]`: the HTML report of one run, or several side by side, from the store the
// runs used (the local folder by default, S3 through SEEDFLOW_S3_* as the other commands), with Temporal's state
// of each run when a server answers. Writes index.html and the skill pages into --out and prints where; an artifact
// that cannot be read is left out, named on the page and in a warning line, and the report is still written (exit 0).
import { spawn } from 'node:child_process'
import { resolve } from 'node:path'
import { localPaths } from '../infra/local-stack.ts'
import { UnknownRunError } from '../records/audit.ts'
import { type WrittenReport, writeReport } from '../report/write-report.ts'
import { storeFromEnv } from '../store/from-env.ts'
import { assertValidRunId, InvalidRunIdError } from '../store/keys.ts'
import { temporalView } from './report-temporal.ts'
import { RunInputError } from './run-checkpoint.ts'

export interface ReportOptions {
  out?: string
  open?: boolean
  trajectories: number
  iterations?: number[]
}

export async function reportCommand(named: string[], options: ReportOptions): Promise<void> {
  const runIds = [...new Set(named)]
  try {
    for (const id of runIds) assertValidRunId(id)
  } catch (error) {
    if (error instanceof InvalidRunIdError) throw new RunInputError(error.message)
    throw error
  }
  const store = storeFromEnv(localPaths().artifacts)
  const out = resolve(options.out ?? `report-${runIds.join('+').slice(0, 100)}`)
  const temporal = await temporalView(runIds)
  if (temporal.note) process.stdout.write(`seedflow: ${temporal.note}\n`)
  let written: WrittenReport
  try {
    written = await writeReport(store, runIds, out, {
      trajectories: options.trajectories,
      ...(options.iterations ? { iterations: options.iterations } : {}),
      workflowStatus: temporal.status,
      ...(temporal.link ? { temporalLink: temporal.link } : {}),
      onProgress: (m) => process.stdout.write(`  ${m}\n`),
    })
  } catch (error) {
    if (error instanceof UnknownRunError) throw new RunInputError(error.message)
    throw error
  }
  process.stdout.write(
    `seedflow: report of ${runIds.join(', ')} in ${written.index} (${written.pages.length} skill pages)\n`,
  )
  if (written.damaged.length > 0) process.stderr.write(`${damageWarning(written.damaged)}\n`)
  if (options.open) openInBrowser(written.index)
}

/** One line naming every artifact the report could not read, for the terminal (the page says why). */
export function damageWarning(damaged: WrittenReport['damaged']): string {
  const runs = [...new Set(damaged.map((d) => d.runId))]
  const audit = runs.map((r) => `npx seedflow audit ${r}`).join('; ')
  return (
    `seedflow: warning: ${damaged.length} damaged artifact${damaged.length === 1 ? '' : 's'} could not be read and ` +
    `${damaged.length === 1 ? 'is' : 'are'} left out of the report (named on its page): ` +
    `${damaged.map((d) => d.key).join(', ')}; check with ${audit}`
  )
}

/** Hands the page to the desktop's browser (xdg-open / open); says so when there is none. */
function openInBrowser(path: string): void {
  const opener = process.platform === 'darwin' ? 'open' : 'xdg-open'
  const child = spawn(opener, [path], { stdio: 'ignore', detached: true })
  child.on('error', () => process.stdout.write(`seedflow: no ${opener} here; open ${path} in a browser\n`))
  child.unref()
}
