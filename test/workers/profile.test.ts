// A worker's profile (workers/profile.ts): each activity's executions, wall time and peak memory, and the engine runs
// made under it counted per activity and model, written to its file after every activity.
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { graphKind } from '../../bench/profile-report.ts'
import { createBuilder, createLocalEngine, encodeModel, Graph, tensor } from '../../engine/index.ts'
import { profileRecorder, type WorkerProfile } from '../../workers/profile.ts'

/** y = x + x over a float vector. */
function doubler(): Uint8Array {
  const graph = new Graph('double')
  const op = createBuilder(graph)
  const x = op.input('x', 'float32', ['N'])
  op.output(op.Add(x, x), 'y')
  return encodeModel(graph)
}

describe('worker profile', () => {
  const engine = createLocalEngine({ threads: 1 })
  let dir = ''
  after(async () => {
    await engine.close()
    if (dir) await rm(dir, { recursive: true, force: true })
  })

  it('counts executions, wall time and engine runs per activity and model, and writes them after each activity', async () => {
    dir = await mkdtemp(join(tmpdir(), 'seedflow-profile-'))
    const path = join(dir, 'profile.json')
    const recorder = profileRecorder(path)
    const profiled = recorder.wrap(engine)
    const model = await profiled.load(doubler())
    const feeds = { x: tensor('float32', [4], [1, 2, 3, 4]) }
    // the interceptor as the Temporal worker calls it, around an activity that runs the model
    const execute = (type: string, runs: number) =>
      recorder
        .activityInterceptor({ info: { activityType: type } } as never)
        .inbound?.execute?.({ args: [], headers: {} }, async () => {
          for (let i = 0; i < runs; i++) await profiled.run(model, feeds)
          return 'done'
        })
    assert.equal(await execute('rollout', 3), 'done')
    await execute('rollout', 2)
    await execute('update', 1)
    await profiled.run(model, feeds) // outside any activity
    const written = JSON.parse(await readFile(path, 'utf8')) as WorkerProfile
    const rollout = written.activities.find((a) => a.activity === 'rollout')
    assert.equal(rollout?.executions, 2)
    assert.ok((rollout?.ms ?? 0) > 0 && (rollout?.peakRssBytes ?? 0) > 0)
    assert.deepEqual(written.models.map((m) => [m.tag, m.runs, m.fedBytes]).sort(), [
      ['rollout', 5, 5 * 16],
      ['update', 1, 16],
    ])
    // the run outside an activity is in the snapshot, under no tag, and the file gets it at close
    recorder.close()
    const closed = JSON.parse(await readFile(path, 'utf8')) as WorkerProfile
    assert.equal(closed.models.find((m) => m.tag === '')?.runs, 1)
    assert.equal(graphKind(closed.models[0]?.outputs ?? []), 'y')
    await profiled.release(model)
  })
})
