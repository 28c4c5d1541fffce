// Malformed input, started the two ways a user starts a run: with the Temporal CLI (`temporal workflow start`,
// the real binary) the seedRun workflow fails at once, every bad field path in its failure, and does not wait for
// an operator; `seedflow run` rejects the same configuration file before it starts anything. Both also refuse ~20
// generated malformed configs (test/seed/malformed-configs.ts: unknown fields, wrong types, out-of-range numbers, a
// 1.5 MB string, deep nesting, …), naming their field paths, and neither writes anything to the store.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { type Client, WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client'
import { toolPaths } from '../../infra/tools.ts'
import { MAX_PATH_LENGTH } from '../../seed/config.ts'
import { listAll } from '../../store/artifact-store.ts'
import { keys } from '../../store/keys.ts'
import { TASK_QUEUES } from '../../workers/task-queues.ts'
import { seedflow } from '../cli/seedflow-process.ts'
import { microConfig } from '../compute/micro.ts'
import {
  baseConfigs,
  entryPointSample,
  HUGE_STRING_LENGTH,
  type MalformedConfig,
  namesPath,
} from '../seed/malformed-configs.ts'
import { type PipelineHarness, startPipeline } from './pipeline-harness.ts'
import { testServers } from './servers.ts'

const run = promisify(execFile)

/** The micro config with four bad fields (one of them missing). */
function malformedConfig(): Record<string, unknown> {
  const c = microConfig('seed')
  const { seed: _missing, ...rest } = c
  return {
    ...rest,
    stage2: { ...c.stage2, groupSize: 0, lr: -1 },
    evaluation: { ...c.evaluation, tasks: 'many' },
  }
}
const BAD_PATHS = ['stage2.groupSize', 'stage2.lr', 'evaluation.tasks', 'seed']

/** `temporal workflow start` with the real CLI against the test server; resolves once the start was accepted. */
async function temporalStart(workflowId: string, inputFile: string): Promise<void> {
  await run(toolPaths().temporal, [
    'workflow',
    'start',
    '--address',
    testServers().temporalAddress,
    '--namespace',
    'default',
    '--task-queue',
    TASK_QUEUES.control,
    '--type',
    'seedRun',
    '--workflow-id',
    workflowId,
    '--input-file',
    inputFile,
  ])
}

/** Runs `task` on every item, at most `width` at a time (the test machine has 2 cores). */
async function pool<T>(items: readonly T[], width: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const lane = async () => {
    while (next < items.length) await task(items[next++] as T)
  }
  await Promise.all(Array.from({ length: width }, lane))
}

/** What a failure or stderr misses of a malformed config's field paths. */
function missingPaths(c: MalformedConfig, lines: string[]): string[] {
  return c.paths.filter((path) => !lines.some((line) => namesPath(line, path))).map((path) => path.join('.'))
}

/** The keys a run left in the store. */
async function runKeys(harness: PipelineHarness, runId: string): Promise<string[]> {
  const out: string[] = []
  for await (const { key } of listAll(harness.store, keys.runPrefix(runId))) out.push(key)
  return out
}

/** The generated malformed configs both entry points get, and a 1.5 MB model folder alone (the case). */
const HUGE_FOLDER: MalformedConfig = (() => {
  const imported = baseConfigs().imported
  return {
    index: -1,
    kinds: ['huge-string'],
    description: [`imported base: model.folder: a string of ${HUGE_STRING_LENGTH} characters`],
    paths: [['model', 'folder']],
    config: { ...imported, model: { ...imported.model, folder: 'x'.repeat(HUGE_STRING_LENGTH) } },
  }
})()
const SAMPLE = [...entryPointSample(18), HUGE_FOLDER]
const HUGE_FOLDER_PROBLEM = `model.folder: at most ${MAX_PATH_LENGTH} characters, got ${HUGE_STRING_LENGTH}`

async function failureOf(client: Client, workflowId: string): Promise<{ message: string; type?: string }> {
  const error = await client.workflow
    .getHandle(workflowId)
    .result()
    .then(
      () => undefined,
      (e: unknown) => e,
    )
  assert.ok(error instanceof WorkflowFailedError, `expected the workflow to fail, got ${String(error)}`)
  for (let e: unknown = error.cause; e; e = (e as { cause?: unknown }).cause) {
    const type = (e as { type?: string }).type
    if (type) return { message: (e as Error).message, type }
  }
  return { message: String((error.cause as Error | undefined)?.message) }
}

describe('malformed run input (real Temporal CLI, real dev server)', () => {
  let harness: PipelineHarness
  let dir: string

  before(async () => {
    harness = await startPipeline(`start-invalid-${process.pid}`)
    dir = await mkdtemp(join(tmpdir(), 'seedflow-start-invalid-'))
  })

  after(async () => {
    await harness?.close()
    await rm(dir, { recursive: true, force: true })
  })

  it('fails a `temporal workflow start` at once with every bad field path, without waiting for an operator', async () => {
    const workflowId = `start-invalid-${process.pid}`
    const input = join(dir, 'input.json')
    await writeFile(input, JSON.stringify({ runId: workflowId, config: malformedConfig() }))
    const started = Date.now()
    await temporalStart(workflowId, input)
    const failure = await failureOf(harness.client, workflowId)
    const seconds = (Date.now() - started) / 1000
    assert.equal(failure.type, 'InvalidRunConfig')
    for (const path of BAD_PATHS) assert.match(failure.message, new RegExp(`^${path.replace('.', '\\.')}: `, 'm'))
    assert.ok(seconds < 30, `failed after ${seconds} s`)
    // non-retryable: planRun ran once, and nothing after it
    const history = await harness.client.workflow.getHandle(workflowId).fetchHistory()
    const scheduled = (history.events ?? []).flatMap(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? [],
    )
    assert.deepEqual(scheduled, ['planRun'])
    assert.deepEqual(await runKeys(harness, workflowId), [])
  })

  it(`fails ${SAMPLE.length} generated malformed configs at once, naming their field paths, writing nothing`, async () => {
    assert.ok(SAMPLE.length >= 19)
    const problems: string[] = []
    await pool(SAMPLE, 4, async (c) => {
      const workflowId = `start-fuzz-${process.pid}-${c.index}`
      const input = join(dir, `${workflowId}.json`)
      await writeFile(input, JSON.stringify({ runId: workflowId, config: c.config }))
      const started = Date.now()
      await temporalStart(workflowId, input)
      const failure = await failureOf(harness.client, workflowId)
      const seconds = (Date.now() - started) / 1000
      const what = `#${c.index} (${c.description.join(', ')})`
      if (failure.type !== 'InvalidRunConfig') problems.push(`${what}: failed as ${failure.type}: ${failure.message}`)
      const missing = missingPaths(c, failure.message.split('\n'))
      if (missing.length > 0) problems.push(`${what}: no ${missing.join(', ')} in ${failure.message.slice(0, 500)}`)
      if (failure.message.length > 20_000) problems.push(`${what}: a failure of ${failure.message.length} characters`)
      if (c === HUGE_FOLDER && failure.message !== `invalid run config:\n${HUGE_FOLDER_PROBLEM}`)
        problems.push(`${what}: failed with ${failure.message.slice(0, 500)}`)
      if (seconds > 30) problems.push(`${what}: failed after ${seconds} s`)
      const written = await runKeys(harness, workflowId)
      if (written.length > 0) problems.push(`${what}: wrote ${written.join(', ')}`)
    })
    assert.deepEqual(problems, [])
  })

  it('fails a start whose input is not { runId, config } at once', async () => {
    const workflowId = `start-no-run-id-${process.pid}`
    const input = join(dir, 'no-run-id.json')
    await writeFile(input, JSON.stringify({ config: microConfig('seed') }))
    await temporalStart(workflowId, input)
    const failure = await failureOf(harness.client, workflowId)
    assert.equal(failure.type, 'InvalidRunConfig')
    assert.match(failure.message, /^invalid run input:\nrunId: undefined differs from the workflow id/)
  })

  it('has `seedflow run` reject the same configuration file before starting anything', async () => {
    const workflowId = `run-invalid-${process.pid}`
    const file = join(dir, 'config.json')
    await writeFile(file, JSON.stringify(malformedConfig()))
    const r = await seedflow(['run', file, '--run-id', workflowId], {
      TEMPORAL_ADDRESS: testServers().temporalAddress,
      SEEDFLOW_ARTIFACTS_DIR: join(dir, 'artifacts'),
      SEEDFLOW_S3_BUCKET: '',
    })
    assert.equal(r.code, 1)
    for (const path of BAD_PATHS) assert.match(r.err, new RegExp(`\\n +${path.replace('.', '\\.')}: `))
    await assert.rejects(harness.client.workflow.getHandle(workflowId).describe(), WorkflowNotFoundError)
  })

  it(`has \`seedflow run\` refuse the ${SAMPLE.length} generated configs, naming their field paths, starting nothing`, async () => {
    const problems: string[] = []
    await pool(SAMPLE, 3, async (c) => {
      const workflowId = `run-fuzz-${process.pid}-${c.index}`
      const file = join(dir, `${workflowId}.config.json`)
      const artifacts = join(dir, `${workflowId}-artifacts`)
      await writeFile(file, JSON.stringify(c.config))
      const r = await seedflow(['run', file, '--run-id', workflowId], {
        TEMPORAL_ADDRESS: testServers().temporalAddress,
        SEEDFLOW_ARTIFACTS_DIR: artifacts,
        SEEDFLOW_S3_BUCKET: '',
      })
      const what = `#${c.index} (${c.description.join(', ')})`
      if (r.code !== 1) problems.push(`${what}: exit ${r.code}: ${r.err.slice(0, 300)}`)
      const lines = r.err.split('\n').map((line) => line.trim())
      const missing = missingPaths(c, lines)
      if (missing.length > 0) problems.push(`${what}: no ${missing.join(', ')} in ${r.err.slice(0, 500)}`)
      if (r.err.length > 20_000) problems.push(`${what}: ${r.err.length} characters on stderr`)
      if (c === HUGE_FOLDER && !lines.includes(HUGE_FOLDER_PROBLEM)) problems.push(`${what}: ${r.err.slice(0, 500)}`)
      if (r.out.includes('starting workflow')) problems.push(`${what}: started a workflow: ${r.out}`)
      const left = await readdir(artifacts).catch(() => [])
      if (left.length > 0) problems.push(`${what}: wrote ${left.join(', ')} in ${artifacts}`)
      await harness.client.workflow
        .getHandle(workflowId)
        .describe()
        .then(
          () => problems.push(`${what}: workflow ${workflowId} exists`),
          (e: unknown) => {
            if (!(e instanceof WorkflowNotFoundError)) problems.push(`${what}: describe failed: ${String(e)}`)
          },
        )
    })
    assert.deepEqual(problems, [])
  })
})
