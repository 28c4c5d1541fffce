import { Command } from 'commander'
import { SEEDFLOW_VERSION } from '../activities/seedflow-version.ts'
import { envServeCommand, parsePort } from './env-command.ts'
import { runCommand, workerCommand } from './run-command.ts'
import { downCommand, upCommand } from './servers-command.ts'

const program = new Command()
  .name('seedflow')
  .description('SEED (Self-Evolving On-Policy Distillation) for LLM agents, on Temporal')
  .version(SEEDFLOW_VERSION)
  .showHelpAfterError()

program
  .command('run')
  .description('start a run and wait for it; on the embedded default this starts the local servers and a worker')
  .argument('[config]', 'run configuration (JSON file); a small default when omitted')
  .option('--run-id <id>', 'run id (= workflow id); default: run-<date>-<time>')
  .action(runCommand)

program
  .command('worker')
  .description('run the all-in-one worker (workflows and every activity) until interrupted')
  .action(workerCommand)

program
  .command('env')
  .description('agent environments')
  .command('serve')
  .description('serve an environment over the AgentGym-style HTTP protocol')
  .argument('<name>', 'sokoban, ezpoints, household, shop or searchqa')
  .option('--port <port>', 'port (0 = any free one)', parsePort, 0)
  .option('--host <host>', 'address to listen on', '127.0.0.1')
  .action(envServeCommand)

program
  .command('up')
  .description('start the local Temporal dev server (kept running until `seedflow down`)')
  .action(upCommand)
program.command('down').description('stop the local servers that seedflow started').action(downCommand)

/** The message and its chain of causes: a failed workflow's reason sits in its activity failure. */
function describeError(error: unknown): string {
  const parts: string[] = []
  for (let e: unknown = error; e !== undefined && parts.length < 5; e = (e as { cause?: unknown }).cause) {
    if (!(e instanceof Error)) {
      parts.push(String(e))
      break
    }
    const type = (e as { type?: string }).type
    parts.push(type ? `${e.message} [${type}]` : e.message)
  }
  return parts.join(': ')
}

try {
  await program.parseAsync()
} catch (error) {
  process.stderr.write(`seedflow: ${describeError(error)}\n`)
  process.exitCode = 1
}
