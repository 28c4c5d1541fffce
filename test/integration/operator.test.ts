// The operator's control of a real run (real dev server, real S3 server, the pipeline activities on a micro
// config): a corrupted artifact and a diverging learning rate make the run wait for an operator instead of
// failing, `seedflow retry` completes it; `seedflow pause` holds it between phases, `setHyperparameters` shows up
// in the next phase's manifest, `seedflow resume` continues it.
import assert from 'node:assert/strict'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import type { Client, WorkflowHandle } from '@temporalio/client'
import type { PhaseManifest } from '../../records/phase-manifest.ts'
import { getJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import type { S3ArtifactStore } from '../../store/s3-store.ts'
import { TASK_QUEUES } from '../../workers/task-queues.ts'
import { seedRun } from '../../workflows/index.ts'
import { iterationStatusQuery, pauseSignal, setHyperparametersUpdate } from '../../workflows/operator.ts'
import { type RunStatus, statusQuery } from '../../workflows/seed-run.ts'
import { seedflow } from '../cli/seedflow-process.ts'
import { microConfig } from '../compute/micro.ts'
import { allKeys, finishedPhases, type PipelineHarness, startPipeline } from './pipeline-harness.ts'
import { testServers } from './servers.ts'
import { until } from './until.ts'

const PREFIX = `operator-${process.pid}`

function config() {
  const c = microConfig('seed')
  return { ...c, evaluation: { ...c.evaluation, tasks: 2 } }
}

describe('operating a run: awaiting an operator, retry, pause, resume, setHyperparameters (real servers)', () => {
  let harness: PipelineHarness
  let store: S3ArtifactStore
  let client: Client
  const env = () => ({ TEMPORAL_ADDRESS: testServers().temporalAddress })

  before(async () => {
    harness = await startPipeline(PREFIX)
    ;({ store, client } = harness)
  })

  after(async () => {
    await harness?.close()
  })

  function start(runId: string, iterations = 1): Promise<WorkflowHandle<typeof seedRun>> {
    const c = config()
    return client.workflow.start(seedRun, {
      taskQueue: TASK_QUEUES.control,
      workflowId: runId,
      args: [{ runId, config: { ...c, stage2: { ...c.stage2, iterations } } }],
      workflowExecutionTimeout: '10 minutes',
    })
  }

  /** Pauses the run as soon as its iteration child runs; resolves once the child is held between phases. */
  async function pauseInIteration(handle: WorkflowHandle<typeof seedRun>, runId: string): Promise<void> {
    await until('the iteration', async () => (await handle.query(statusQuery)).phase === 'iteration')
    await handle.signal(pauseSignal)
    const child = client.workflow.getHandle(`${runId}/iter-0`)
    await until('the held child', async () => (await child.query(iterationStatusQuery)).held)
  }

  /** The phase manifests of a run (not the iteration's metrics, which the wrapper around recordIteration writes). */
  async function phaseManifests(runId: string): Promise<string[]> {
    return (await allKeys(store, keys.runPrefix(runId)))
      .filter((k) => /\/\d{4}(\.attempt-\d+)?\.manifest\.json$/.test(k) && !k.includes('/metrics/'))
      .sort()
  }

  const awaiting = (handle: WorkflowHandle<typeof seedRun>) =>
    until('awaiting-operator', async () => {
      const s = await handle.query(statusQuery)
      return s.awaitingOperator ? s : undefined
    })

  it('waits for an operator on a corrupted artifact, names its key, and completes after restore and `seedflow retry`', async () => {
    const runId = `corrupt-${process.pid}`
    const handle = await start(runId)
    await pauseInIteration(handle, runId)
    // every phase of the iteration reads the acting checkpoint (Stage 1's): change one byte of it in place, as
    // bit rot would (versitygw keeps the object as a file, its recorded sha256 in xattrs)
    const key = keys.sftCheckpoint(runId, 'model.safetensors')
    const { stateDir, s3Bucket } = testServers()
    const file = join(stateDir, 's3-data', s3Bucket, PREFIX, key)
    const original = await readFile(file)
    const corrupted = Buffer.from(original)
    corrupted[corrupted.length - 1] = (corrupted[corrupted.length - 1] as number) ^ 0xff
    await writeFile(file, corrupted, { flag: 'r+' })
    const finishedBefore = await finishedPhases(store, runId)
    await handle.signal('resume')

    const status: RunStatus = await awaiting(handle)
    const wait = status.awaitingOperator
    assert.equal(wait?.type, 'IntegrityError')
    assert.ok(wait?.message.includes(key), wait?.message)
    assert.equal(wait?.iteration, 0)
    assert.equal(status.phase, 'awaiting-operator')
    const described = await handle.describe()
    assert.equal(described.status.name, 'RUNNING')
    assert.deepEqual(described.searchAttributes.SeedPhase, ['awaiting-operator'])
    const shown = await seedflow(['status', runId], env())
    assert.equal(shown.code, 0, shown.err)
    assert.match(shown.out, /AWAITING AN OPERATOR since .*: IntegrityError in \w+ \(iteration 0\)/)
    assert.ok(shown.out.includes(key), shown.out)

    await writeFile(file, original, { flag: 'r+' })
    const retried = await seedflow(['retry', runId], env())
    assert.equal(retried.code, 0, `${retried.out}\n${retried.err}`)
    assert.match(retried.out, /retrying iteration 0/)
    const result = await handle.result()
    assert.equal(result.outcome, 'completed')
    assert.deepEqual(
      result.evaluations.map((e) => e.label),
      ['base', 'stage 1', 'iteration 0'],
    )
    assert.deepEqual((await handle.describe()).searchAttributes.SeedPhase, ['done'])
    // what finished before the failure was reused by the retry, not recomputed under a new attempt
    const finished = await finishedPhases(store, runId)
    for (const phase of finishedBefore) assert.ok(finished.includes(phase), phase)
    assert.deepEqual(
      finished.filter((p) => p.includes('+attempt')),
      [],
    )
  })

  it('re-hashes what a rerun would reuse: a bit flipped in a rollout and in the final checkpoint makes it wait, naming both', async () => {
    const runId = `rerun-${process.pid}`
    const first = await start(runId)
    assert.equal((await first.result()).outcome, 'completed')
    const { stateDir, s3Bucket } = testServers()
    const damaged = [keys.rollouts(runId, 0, 0), keys.checkpoint(runId, 0, 'model.safetensors')]
    const originals = new Map<string, Buffer>()
    for (const key of damaged) {
      const file = join(stateDir, 's3-data', s3Bucket, PREFIX, key)
      const original = await readFile(file)
      originals.set(file, original)
      const flipped = Buffer.from(original)
      const at = Math.floor(flipped.length / 2)
      flipped[at] = (flipped[at] as number) ^ 0x01 // one bit, same size: the store's recorded sha256 still answers a head
      await writeFile(file, flipped, { flag: 'r+' })
    }
    const finishedBefore = await finishedPhases(store, runId)

    // the same run id again: every phase is finished, so everything would be reused
    const rerun = await start(runId)
    const waiting = async (after?: string) => {
      const wait = await until('awaiting-operator', async () => {
        const w = (await rerun.query(statusQuery)).awaitingOperator
        return w && w.since !== after ? w : undefined
      })
      assert.equal(wait.type, 'CorruptArtifact')
      assert.equal(wait.phase, 'verifyRun')
      for (const key of damaged) assert.ok(wait.message.includes(key), wait.message)
      assert.match(wait.message, /2 stored artifacts it would reuse are damaged/)
      return wait
    }
    const firstWait = await waiting()
    const shown = await seedflow(['status', runId], env())
    assert.equal(shown.code, 0, shown.err)
    for (const key of damaged) assert.ok(shown.out.includes(key), shown.out)
    assert.match(shown.out, /restore the artifact named above/)

    // a retry with nothing repaired checks again and waits again
    const unrepaired = await seedflow(['retry', runId], env())
    assert.equal(unrepaired.code, 0, `${unrepaired.out}\n${unrepaired.err}`)
    await waiting(firstWait.since)

    for (const [file, original] of originals) await writeFile(file, original, { flag: 'r+' })
    const retried = await seedflow(['retry', runId], env())
    assert.equal(retried.code, 0, `${retried.out}\n${retried.err}`)
    const result = await rerun.result()
    assert.equal(result.outcome, 'completed')
    // repaired in place: every phase reused, nothing computed under a new attempt
    assert.deepEqual((await finishedPhases(store, runId)).sort(), [...finishedBefore].sort())
  })

  it('fails a diverging update non-retryably naming the loss term, waits, and completes after retry with a smaller lr', async () => {
    const runId = `diverge-${process.pid}`
    const handle = await start(runId)
    const change = await handle.executeUpdate(setHyperparametersUpdate, { args: [{ stage2: { lr: 1e12 } }] })
    assert.deepEqual(change.overrides, { stage2: { lr: 1e12 } })
    const status = await awaiting(handle)
    const wait = status.awaitingOperator
    assert.equal(wait?.type, 'NonFiniteLossError')
    assert.equal(wait?.phase, 'update')
    assert.match(
      wait?.message ?? '',
      /the (pg|kl|entropy|opd|total) loss term is (NaN|-?Infinity) in mini-batch [12] of/,
    )
    // non-retryable: the update ran once
    const history = await client.workflow.getHandle(`${runId}/iter-0`).fetchHistory()
    const updates = (history.events ?? []).filter(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'update',
    )
    assert.equal(updates.length, 1)
    const started = (history.events ?? []).filter((e) => e.activityTaskStartedEventAttributes)
    assert.ok(started.every((e) => (e.activityTaskStartedEventAttributes?.attempt ?? 1) === 1))

    const refused = await seedflow(['retry', runId, '--set', 'stage2.lr=-1', '--set', 'stage2.iterations=3'], env())
    assert.equal(refused.code, 1)
    assert.match(refused.err, /stage2\.lr: /)
    assert.match(refused.err, /stage2\.iterations: cannot change during a run/)
    const retried = await seedflow(['retry', runId, '--set', 'stage2.lr=1e-4'], env())
    assert.equal(retried.code, 0, `${retried.out}\n${retried.err}`)
    const result = await handle.result()
    assert.equal(result.outcome, 'completed')
    const final = await handle.query(statusQuery)
    assert.deepEqual(
      final.hyperparameters.map((c) => [c.source, c.cumulative]),
      [
        ['setHyperparameters', { stage2: { lr: 1e12 } }],
        ['retryIteration', { stage2: { lr: 1e-4 } }],
      ],
    )
    const updateManifests = (await allKeys(store, keys.iterationPrefix(runId, 0))).filter((k) =>
      /\/update\/0000(\.attempt-\d+)?\.manifest\.json$/.test(k),
    )
    assert.equal(updateManifests.length, 1, updateManifests.join(', '))
    const manifest = (await getJson(store, updateManifests[0] as string)) as PhaseManifest
    assert.deepEqual(manifest.hyperparameters, { stage2: { lr: 1e-4 } })
    assert.equal(manifest.configSha256, final.hyperparameters[1]?.configSha256)
    // the change is recorded at run level too
    const record = (await getJson(store, `${keys.runPrefix(runId)}hyperparameters/0001.json`)) as {
      overrides: unknown
      configSha256: string
    }
    assert.deepEqual(record.overrides, { stage2: { lr: 1e-4 } })
    assert.equal(record.configSha256, manifest.configSha256)
  })

  it("holds a paused run between phases, records setHyperparameters in the next phases' manifests, and resumes", async () => {
    const runId = `pause-${process.pid}`
    const handle = await start(runId, 3)
    const paused = await seedflow(['pause', runId], env())
    assert.equal(paused.code, 0, `${paused.out}\n${paused.err}`)
    // held at a boundary of the run itself (before Stage 2) or of the running iteration child
    await until('the held run', async () => {
      const s = await handle.query(statusQuery)
      if (s.held) return true
      if (s.phase !== 'iteration') return false
      return (await client.workflow.getHandle(`${runId}/iter-${s.iteration}`).query(iterationStatusQuery)).held
    })
    const before = await phaseManifests(runId)
    await new Promise((resolve) => setTimeout(resolve, 3000))
    assert.deepEqual(await phaseManifests(runId), before, 'no phase finished while paused')
    const shown = await seedflow(['status', runId], env())
    assert.equal(shown.code, 0, shown.err)
    // held at a boundary: the phase that starts on resume is named, in the phase line and the pause line
    const next = /paused +yes, held before (\S.*?) — resume with/.exec(shown.out)?.[1]
    assert.ok(next, shown.out)
    assert.match(shown.out, new RegExp(`phase +(iteration \\d+: )?held before ${next}\\n`))
    assert.match(shown.out, /iterations +\[[#-]+\] \d\/3/)

    const change = await handle.executeUpdate(setHyperparametersUpdate, { args: [{ stage2: { clipHigh: 0.25 } }] })
    await assert.rejects(
      handle.executeUpdate(setHyperparametersUpdate, { args: [{ stage2: { clipLow: 2, nope: 1 } }] }),
      (e: Error) => {
        const message = String((e.cause as Error | undefined)?.message)
        return /stage2\.clipLow: /.test(message) && /stage2\.nope: /.test(message)
      },
    )
    // the same refusal through the CLI: exit 1, every bad field path, nothing changed
    const refused = await seedflow(['set', runId, '--set', 'stage2.clipLow=2', '--set', 'stage2.nope=1'], env())
    assert.equal(refused.code, 1, refused.out)
    assert.match(refused.err, /refused the change: .*stage2\.clipLow: /s)
    assert.match(refused.err, /stage2\.nope: /)
    const empty = await seedflow(['set', runId], env())
    assert.equal(empty.code, 1)
    assert.match(empty.err, /nothing to set/)
    const resumed = await seedflow(['resume', runId], env())
    assert.equal(resumed.code, 0, resumed.err)
    const result = await handle.result()
    assert.equal(result.outcome, 'completed')
    // every phase that finished after the change ran under it and records it; none before
    const after = await phaseManifests(runId)
    const changed = after.filter((k) => !before.includes(k))
    assert.ok(changed.includes(keys.phaseManifest(runId, 2, 'update', 0)), changed.join(', '))
    for (const key of after) {
      const m = (await getJson(store, key)) as PhaseManifest
      if (before.includes(key)) assert.equal(m.hyperparameters, undefined, key)
      else {
        assert.deepEqual(m.hyperparameters, { stage2: { clipHigh: 0.25 } }, key)
        assert.equal(m.configSha256, change.configSha256, key)
      }
    }
  })

  it('names an unknown run and its server', async () => {
    const r = await seedflow(['status', `no-such-run-${process.pid}`], env())
    assert.equal(r.code, 1)
    assert.ok(r.err.includes(`no run no-such-run-${process.pid} on ${testServers().temporalAddress}`), r.err)
  })
})
