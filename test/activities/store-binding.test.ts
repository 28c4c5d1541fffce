// One store per run (issue 40, item 5), on folder stores: planRun records the run's store in run.json and its
// RunRef; a worker of another store refuses the run's activities at once, non-retryably (StoreMismatch), naming
// both stores and writing nothing; a copy of the store is the same store; a RunRef without a store still works.
import assert from 'node:assert/strict'
import { cp, mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { ApplicationFailure } from '@temporalio/common'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import type { Engine } from '../../engine/index.ts'
import type { PipelineActivities, RunRef } from '../../records/contracts.ts'
import { NON_RETRYABLE_TYPES } from '../../records/failures.ts'
import type { RunRecord } from '../../records/record-run.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { getJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import { microConfig } from '../compute/micro.ts'

/** No activity here may reach the engine: a mismatch is refused before any phase starts. */
const NO_ENGINE = new Proxy({} as Engine, {
  get: (_, name) => {
    throw new Error(`the engine was used (${String(name)}) by an activity that should have been refused`)
  },
})

async function failure(promise: Promise<unknown>): Promise<ApplicationFailure> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  assert.ok(error instanceof ApplicationFailure, `expected an ApplicationFailure, got ${String(error)}`)
  return error
}

/** Every file under `root` but the store's own identity record (what an activity wrote). */
async function written(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true })
  return entries.filter((e) => e.isFile() && !e.name.endsWith('store.json')).map((e) => e.name)
}

describe('a run is bound to its store', () => {
  let dir: string
  let home: FsArtifactStore
  let other: FsArtifactStore
  let acts: PipelineActivities
  let elsewhere: PipelineActivities
  let run: RunRef

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'seedflow-store-binding-'))
    home = new FsArtifactStore(join(dir, 'home'))
    other = new FsArtifactStore(join(dir, 'other'))
    acts = createPipelineActivities({ store: home, engine: NO_ENGINE })
    elsewhere = createPipelineActivities({ store: other, engine: NO_ENGINE })
    ;({ run } = await acts.planRun({ runId: 'bound', config: microConfig('grpo'), store: await home.identity() }))
  })

  after(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it('planRun records the store in run.json and in the RunRef', async () => {
    const identity = await home.identity()
    assert.deepEqual(run.store, { id: identity.id, location: identity.location })
    const record = (await getJson(home, keys.runRecord('bound'))) as RunRecord
    assert.deepEqual(record.store, run.store)
  })

  it('planRun without a store binds the run to the planning worker’s store', async () => {
    const { run: unbound } = await acts.planRun({ runId: 'planned-here', config: microConfig('grpo') })
    assert.equal(unbound.store?.id, (await home.identity()).id)
    assert.equal(((await getJson(home, keys.runRecord('planned-here'))) as RunRecord).store?.id, unbound.store?.id)
  })

  it('a worker of another store refuses a phase: StoreMismatch, non-retryable, naming both stores', async () => {
    const mine = await other.identity()
    const home_ = await home.identity()
    const f = await failure(elsewhere.prepare({ run }))
    assert.equal(f.type, 'StoreMismatch')
    assert.equal(f.nonRetryable, true)
    assert.ok(NON_RETRYABLE_TYPES.includes('StoreMismatch'), 'the workflows’ retry policy refuses it too')
    assert.equal(
      f.message,
      `prepare: run bound lives in store ${home_.id} (${home_.location}), but this worker's store is ` +
        `${mine.id} (${mine.location}); serve the run from workers started with its store (SEEDFLOW_ARTIFACTS_DIR ` +
        'or the SEEDFLOW_S3_* variables), stop this one, then retry the run',
    )
    assert.deepEqual(await written(join(dir, 'other')), [])
  })

  it('a worker of another store refuses the control activities too, before touching its store', async () => {
    const record = await failure(
      elsewhere.recordIteration({
        run,
        iteration: 0,
        algorithm: 'grpo',
        snapshot: { key: 'x', sha256: 'y', bytes: 0 },
        manifests: { rollout: [], analyze: [], rescore: [], update: [] },
      }),
    )
    assert.equal(record.type, 'StoreMismatch')
    const plan = await failure(
      elsewhere.planRun({ runId: 'bound-2', config: microConfig('grpo'), store: await home.identity() }),
    )
    assert.equal(plan.type, 'StoreMismatch')
    assert.deepEqual(await written(join(dir, 'other')), [])
  })

  it('a copy of the store folder is the same store: its worker accepts the run', async () => {
    await cp(join(dir, 'home'), join(dir, 'copy'), { recursive: true, preserveTimestamps: true })
    const copy = new FsArtifactStore(join(dir, 'copy'))
    assert.equal((await copy.identity()).id, (await home.identity()).id)
    const again = createPipelineActivities({ store: copy, engine: NO_ENGINE })
    const { run: replanned } = await again.planRun({ runId: 'bound', config: microConfig('grpo'), store: run.store })
    assert.equal(replanned.store?.id, run.store?.id)
  })

  it('a RunRef from before stores were recorded (no store) is served by any worker', async () => {
    const { run: old } = await elsewhere.planRun({ runId: 'old', config: microConfig('grpo') })
    const { store: _, ...legacy } = old
    const changed = await elsewhere.recordHyperparameters({
      run: legacy,
      change: {
        seq: 0,
        source: 'setHyperparameters',
        iteration: 0,
        phase: 'prepare',
        overrides: { stage2: { lr: 0.001 } },
        cumulative: { stage2: { lr: 0.001 } },
        at: '2026-12-04T00:00:00.000Z',
      },
    })
    assert.equal(changed.run.store, undefined)
  })

  it('a changed configuration keeps the run’s store', async () => {
    const changed = await acts.recordHyperparameters({
      run,
      change: {
        seq: 0,
        source: 'setHyperparameters',
        iteration: 0,
        phase: 'prepare',
        overrides: { stage2: { lr: 0.001 } },
        cumulative: { stage2: { lr: 0.001 } },
        at: '2026-12-04T00:00:00.000Z',
      },
    })
    assert.deepEqual(changed.run.store, run.store)
    assert.notEqual(changed.run.configSha256, run.configSha256)
  })
})
