import { Command, InvalidArgumentError, Option } from 'commander'
import { parseExecutionProvider } from '../engine/execution-provider.ts'
import { SEEDFLOW_VERSION } from '../records/seedflow-version.ts'
import { chatCommand } from './chat-command.ts'
import { configCommand, PRESET_NAMES } from './config-command.ts'
import { envServeCommand, parsePort } from './env-command.ts'
import { EVAL_SPLITS, evalCommand, skillGapCommand } from './eval-command.ts'
import { generateCommand } from './generate-command.ts'
import { importCommand } from './import-command.ts'
import { addOperatorCommands } from './operator-cli.ts'
import { runCommand } from './run-command.ts'
import { SERVE_DEFAULTS, serveCommand } from './serve-command.ts'
import { downCommand, upCommand } from './servers-command.ts'
import { registerStoreCommands } from './store-commands.ts'
import { WORKER_ROLES, workerCommand } from './worker-command.ts'

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

function positiveInt(value: string): number {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`not a positive integer: ${value}`)
  return n
}

program
  .command('config')
  .description('print a preset run configuration (JSON) to edit and pass to `seedflow run <file>`')
  .argument('<preset>', PRESET_NAMES.join(', '))
  .option(
    '--algorithm <row>',
    'algorithm row (seed, grpo, skill-prompt, skill-grpo, grpo-opsd, seed-static, seed-library, seed-oracle, seed-no-sft)',
    'seed',
  )
  .option('--model-folder <dir>', 'Hugging Face model folder (paper presets, cpu-household-smollm2)')
  .option(
    '--run-id <id>',
    'print the seedRun workflow input { runId, config } instead, for `temporal workflow start --input-file`',
  )
  .action(configCommand)

function nonNegativeInt(value: string): number {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`not a non-negative integer: ${value}`)
  return n
}

/** A port for seedflow's metrics; the SDK's go on the next one. */
function metricsPort(value: string): number {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1 || n > 65534) throw new InvalidArgumentError(`not a port in 1..65534: ${value}`)
  return n
}

function executionProvider(value: string) {
  try {
    return parseExecutionProvider(value)
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message)
  }
}

function positiveNumber(value: string): number {
  const n = Number(value)
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`not a positive number: ${value}`)
  return n
}

program
  .command('eval')
  .description(
    'evaluate a checkpoint on held-out tasks without a Temporal server: prints success per family and overall, ' +
      'macro average, mean score, mean episode length and invalid rate with 95% intervals',
  )
  .argument(
    '[checkpoint]',
    'a checkpoint folder (ours or a Hugging Face one), or a store key prefix ending in checkpoint/',
  )
  .option('--run <id>', "a run's checkpoint (with --iteration); the run's prompt settings and evaluation seeds")
  .option('--iteration <k>', 'with --run: iteration k (the checkpoint it wrote), base, stage1 or final (default final)')
  .option('--env <name>', "environment (default: the run's; required for a checkpoint outside any run)")
  .option('--split <split>', EVAL_SPLITS.join(' | '), 'test-seen')
  .option(
    '--seeds <from:to>',
    "task seeds, half-open: 0:100 is seeds 0 … 99 (default: the run's evaluation range, else 0:500)",
  )
  .option('--episodes <n>', 'evaluate n tasks, seeds 0 … n-1 (instead of --seeds)', positiveInt)
  .option('--temperature <t>', 'sampling temperature', positiveNumber, 0.4)
  .option(
    '--algorithm-row <row>',
    "the row whose evaluation prompt is used; skill-prompt and skill-grpo put a Stage 1 library skill in it (needs the run's annotations) (default: the run's row)",
  )
  .option('--seed <n>', "root seed of the sampling (default: the run's or the preset's seed)", nonNegativeInt)
  .option('--out <file>', 'write the JSON report: {checkpoint, env, split, seeds, temperature, tasks, aggregates, ...}')
  .option('--threads <n>', 'ORT intra-op threads (default: one per CPU core; 1 is bit-reproducible)', positiveInt)
  .option(
    '--skill-gap',
    "instead: the premise check (does the policy read what a skill says?): the expert's responses scored with each " +
      "task's own oracle skill, another task's and none, in nats (docs/benchmarks.md §3.8)",
  )
  .action(async (checkpoint, options) => {
    await (options.skillGap ? skillGapCommand(checkpoint, options) : evalCommand(checkpoint, options))
  })

const CHECKPOINT_ARGUMENT =
  'a checkpoint folder (ours or a Hugging Face one), or a store key prefix ending in checkpoint/'
const RUN_OPTION = ['--run <id>', "a run's checkpoint (with --iteration)"] as const
const ITERATION_OPTION = ['--iteration <k>', 'with --run: iteration k, base, stage1 or final (default final)'] as const

function nonNegativeNumber(value: string): number {
  const n = Number(value)
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError(`not a non-negative number: ${value}`)
  return n
}

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value]
}

program
  .command('generate')
  .description('complete a prompt with a checkpoint (the plain policy), writing the text as it is sampled')
  .argument('[checkpoint]', CHECKPOINT_ARGUMENT)
  .option(...RUN_OPTION)
  .option(...ITERATION_OPTION)
  .requiredOption('--prompt <text>', 'the text to complete')
  .option('--chat', "render the prompt as one user turn through the model's chat template")
  .option('--max-tokens <n>', 'new tokens at most (default: what the context leaves)', positiveInt)
  .option('--temperature <t>', 'sampling temperature; 0 = greedy', nonNegativeNumber, 0)
  .option('--top-p <p>', 'nucleus mass in (0, 1]', positiveNumber)
  .option('--seed <n>', 'sampling seed', nonNegativeInt)
  .option('--stop <text>', 'a stop string (repeatable)', collect)
  .option('--context <n>', "cache slots: prompt + new tokens (default min(2048, the model's positions))", positiveInt)
  .option('--json', 'print {text, prompt_token_ids, token_ids, finish_reason} instead of the text')
  .option('--threads <n>', 'ORT intra-op threads (default: one per CPU core)', positiveInt)
  .action(async (checkpoint, options) => {
    await generateCommand(checkpoint, options)
  })

program
  .command('chat')
  .description(
    'chat with a checkpoint through its chat template: each line is a user turn, the reply streams as it is sampled; /reset, /exit, Ctrl-C',
  )
  .argument('[checkpoint]', CHECKPOINT_ARGUMENT)
  .option(...RUN_OPTION)
  .option(...ITERATION_OPTION)
  .option('--system <text>', 'a system message')
  .option('--max-tokens <n>', 'new tokens per reply at most', positiveInt, 256)
  .option('--temperature <t>', 'sampling temperature; 0 = greedy', nonNegativeNumber, 0.7)
  .option('--top-p <p>', 'nucleus mass in (0, 1]', positiveNumber)
  .option('--seed <n>', 'sampling seed (each turn draws its own stream from it)', nonNegativeInt)
  .option('--context <n>', "cache slots: conversation + reply (default min(2048, the model's positions))", positiveInt)
  .option('--threads <n>', 'ORT intra-op threads (default: one per CPU core)', positiveInt)
  .action(async (checkpoint, options) => {
    await chatCommand(checkpoint, options)
  })

program
  .command('serve')
  .description(
    'serve a checkpoint (the plain policy) over an OpenAI-compatible API: GET /v1/models, POST /v1/chat/completions ' +
      'and /v1/completions (streaming too), GET /metrics; concurrent requests share one decode batch',
  )
  .argument('[checkpoint]', CHECKPOINT_ARGUMENT)
  .option(...RUN_OPTION)
  .option(...ITERATION_OPTION)
  .option('--host <address>', 'address to listen on', SERVE_DEFAULTS.host)
  .option('--port <port>', 'port (0 = any free one)', parsePort, SERVE_DEFAULTS.port)
  .option(
    '--served-model-name <name>',
    "the model name clients send (default: the folder's name, or <run>/<iteration>)",
  )
  .option(
    '--batch-rows <n>',
    'sequences decoded at once (a request with n choices takes n)',
    positiveInt,
    SERVE_DEFAULTS.batchRows,
  )
  .option(
    '--context <n>',
    "cache slots per row: prompt + max_tokens (default min(2048, the model's positions))",
    positiveInt,
  )
  .option(
    '--max-queue <n>',
    'requests waiting for rows at most; beyond, 429 with Retry-After',
    positiveInt,
    SERVE_DEFAULTS.maxQueue,
  )
  .option('--max-body-bytes <n>', 'largest request body; beyond, 413', positiveInt, SERVE_DEFAULTS.maxBodyBytes)
  .option(
    '--api-key-env <name>',
    'require `Authorization: Bearer <key>` on /v1, the key read from this environment variable (401 otherwise)',
  )
  .option(
    '--cors <origins>',
    'let browser pages from these origins call the API (comma-separated scheme://host[:port], or * for any); ' +
      'default: no CORS headers',
  )
  .option('--no-access-log', 'do not write a stderr line per request (method, path, status, tokens, time)')
  .option(
    '--grace-period <seconds>',
    'on SIGTERM, how long in-flight requests may finish before they fail',
    nonNegativeNumber,
    SERVE_DEFAULTS.gracePeriod,
  )
  .option('--threads <n>', 'ORT intra-op threads (default: one per CPU core)', positiveInt)
  .action(async (checkpoint, options) => {
    await serveCommand(checkpoint, options)
  })

program
  .command('import')
  .description(
    'convert a llama.cpp GGUF file (llama, qwen2; F32 … Q6_K tensors, byte-level BPE tokenizer) or a Hugging Face ' +
      'folder into a checkpoint folder that seedflow and transformers read (float32 weights, tokenizer, chat template)',
  )
  .argument('<source>', 'a .gguf file or a Hugging Face model folder')
  .requiredOption('--out <folder>', 'the folder to write (must not exist)')
  .action(importCommand)

program
  .command('worker')
  .description(
    'run a worker until interrupted: local (the default) polls every task queue; control runs the workflows and ' +
      'light activities (queue seedflow), rollout the seedflow-rollout queue, train the seedflow-train queue; ' +
      'start as many rollout workers as you like, they share the fan-out; with --run <id> the queues of that run ' +
      '(seedflow@<id>, seedflow-rollout@<id>, seedflow-train@<id>) instead',
  )
  .argument('[role]', Object.keys(WORKER_ROLES).join(' | '), 'local')
  .option(
    '--run <id>',
    'serve this run only, on its own task queues (a `seedflow run` polls them; this resumes one that was interrupted); default: the shared queues',
  )
  .addOption(
    new Option(
      '--counters-file <path>',
      'append one JSON line per phase shard this worker computes, reuses or starts computing, with running totals',
    ).env('SEEDFLOW_COUNTERS_FILE'),
  )
  .addOption(
    new Option(
      '--profile <path>',
      "write this worker's profile (JSON, rewritten after each activity): wall time and peak memory per activity, wall time and bytes per model run",
    ).env('SEEDFLOW_PROFILE'),
  )
  .addOption(
    new Option(
      '--heartbeat-timeout <seconds>',
      'heartbeat timeout of the model-bound activities of runs this worker plans (default 300): how soon the activity of a dead worker is retried',
    )
      .argParser(positiveInt)
      .env('SEEDFLOW_HEARTBEAT_TIMEOUT'),
  )
  .addOption(
    new Option('--episodes-per-shard <n>', 'episodes per rollout shard of runs this worker plans (default 64)')
      .argParser(positiveInt)
      .env('SEEDFLOW_EPISODES_PER_SHARD'),
  )
  .addOption(
    new Option(
      '--model-activities <n>',
      'activities run at once on each of the rollout and train queues (default: no cap)',
    )
      .argParser(positiveInt)
      .env('SEEDFLOW_MODEL_ACTIVITIES'),
  )
  .addOption(
    new Option(
      '--metrics-port <port>',
      "serve Prometheus metrics at http://<host>:<port>/metrics (seedflow's) and <port+1> (the Temporal SDK's)",
    )
      .argParser(metricsPort)
      .env('SEEDFLOW_METRICS_PORT'),
  )
  .addOption(
    new Option('--metrics-host <address>', 'address the metrics endpoints listen on')
      .default('127.0.0.1')
      .env('SEEDFLOW_METRICS_HOST'),
  )
  .addOption(
    new Option(
      '--execution-provider <ep>',
      'where models run: cpu, cuda or cuda:<device> (checked at start; CUDA needs `bash infra/install-cuda.sh`)',
    )
      .argParser(executionProvider)
      .env('SEEDFLOW_EXECUTION_PROVIDER'),
  )
  .addOption(
    new Option(
      '--engine <engine>',
      "the tensor engine: onnxruntime-node, or native (ORT's C API, kept tensors where the model runs; built by cargo)",
    )
      .choices(['onnxruntime-node', 'native'])
      .default('onnxruntime-node')
      .env('SEEDFLOW_ENGINE'),
  )
  .action(workerCommand)

program
  .command('env')
  .description('agent environments')
  .command('serve')
  .description('serve an environment over the AgentGym-style HTTP protocol')
  .argument('<name>', 'sokoban, ezpoints, household, shop or searchqa')
  .option('--port <port>', 'port (0 = any free one)', parsePort, 0)
  .option('--host <host>', 'address to listen on', '127.0.0.1')
  .option(
    '--max-episodes <n>',
    'most episodes open at once; /create beyond them answers 429 (default 1024)',
    positiveInt,
  )
  .option(
    '--idle-ttl <seconds>',
    'evict an episode that no request touched for this long; its id then answers 404 (default 1800)',
    positiveNumber,
  )
  .option(
    '--bare-actions',
    "take a step's bare action (`up`) as the environment's formatted response: AgentGym's clients send the action they parsed",
  )
  .action(envServeCommand)

registerStoreCommands(program) // audit, export, export-dumps, report, ui

program
  .command('up')
  .description('start the local Temporal dev server (kept running until `seedflow down`)')
  .action(upCommand)
program.command('down').description('stop the local servers that seedflow started').action(downCommand)
addOperatorCommands(program)

/**
 * The message and its chain of causes: a failed workflow's reason sits in its activity failure. A cause whose
 * message the text already holds (a typed store error names its cause) is not repeated.
 */
function describeError(error: unknown): string {
  const parts: string[] = []
  let depth = 0
  for (
    let e: unknown = error;
    e !== undefined && depth++ < 8 && parts.length < 5;
    e = (e as { cause?: unknown }).cause
  ) {
    if (!(e instanceof Error)) {
      parts.push(String(e))
      break
    }
    if (parts.length > 0 && e.message !== '' && parts.join(': ').includes(e.message)) continue
    const type = (e as { type?: string }).type
    parts.push(type ? `${e.message} [${type}]` : e.message)
  }
  return parts.join(': ')
}

/**
 * How long a failed command may take to exit once its error is printed. Everything it awaited has settled by
 * then; what is left is a leak, such as the workflow threads of a Worker whose creation failed (the SDK starts
 * them before it contacts the server and does not stop them when that fails), which would hold the process for
 * good. Unref'd: a process with nothing left exits at once.
 */
const EXIT_GRACE_MS = 1000

try {
  await program.parseAsync()
} catch (error) {
  process.stderr.write(`seedflow: ${describeError(error)}\n`)
  process.exitCode ||= 1
  setTimeout(() => process.exit(), EXIT_GRACE_MS).unref()
}
