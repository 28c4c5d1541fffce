// The operator's commands on a running run, registered on the `seedflow` program: status, retry, pause,
// resume, abort, set. Each connects to the run's Temporal server and starts nothing.
import { type Command, InvalidArgumentError, Option } from 'commander'
import { abortCommand, pauseCommand, resumeCommand, retryCommand, setCommand } from './control-commands.ts'
import { STATUS_TIMEOUT_S, statusCommand } from './status-command.ts'

const RUN = ['<run>', 'run id (= the seedRun workflow id)'] as const

const collect = (value: string, previous: string[] = []) => [...previous, value]

/** Seconds > 0; an empty value (an environment variable set to '') is no value. */
function positiveSeconds(value: string): number | undefined {
  if (value === '') return undefined
  const n = Number(value)
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`not a positive number of seconds: ${value}`)
  return n
}

export function addOperatorCommands(program: Command): void {
  program
    .command('status')
    .description(
      'where a run is: phase, iteration k of K, evaluations, paused, awaiting an operator (with the failure), hyperparameter changes',
    )
    .argument(...RUN)
    .addOption(
      new Option(
        '--timeout <seconds>',
        `give up when the run has not answered this long after the command started (no worker serves it) (default ${STATUS_TIMEOUT_S})`,
      )
        .argParser(positiveSeconds)
        .env('SEEDFLOW_STATUS_TIMEOUT'),
    )
    .action(statusCommand)
  program
    .command('retry')
    .description('run the failed iteration of a run that awaits an operator again, optionally with new hyperparameters')
    .argument(...RUN)
    .option('--set <path=value>', 'a hyperparameter override, e.g. stage2.lr=1e-4 (repeatable)', collect)
    .option('--overrides <file>', 'hyperparameter overrides as JSON, e.g. {"stage2": {"lr": 1e-4}} (--set on top)')
    .action(retryCommand)
  program
    .command('set')
    .description('change hyperparameters of a running run (validated; recorded; the next phase runs with them)')
    .argument(...RUN)
    .option('--set <path=value>', 'a hyperparameter, e.g. stage2.lr=1e-4 (repeatable)', collect)
    .option('--overrides <file>', 'hyperparameters as JSON, e.g. {"stage2": {"lr": 1e-4}} (--set on top)')
    .action(setCommand)
  program
    .command('pause')
    .description('pause a run between phases: the running phase finishes, no new one starts until resume')
    .argument(...RUN)
    .action(pauseCommand)
  program
    .command('resume')
    .description('resume a paused run')
    .argument(...RUN)
    .action(resumeCommand)
  program
    .command('abort')
    .description(
      'end a run cleanly after its running phase (also a run that awaits an operator; a phase retrying after failures is cancelled)',
    )
    .argument(...RUN)
    .option('--reason <text>', 'recorded as the run result')
    .option(
      '--now',
      'cancel the running phase instead of letting it finish (done anyway when it is retrying after failures); finished shards stay',
    )
    .action(abortCommand)
}
