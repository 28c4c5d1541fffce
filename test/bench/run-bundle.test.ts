import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { gunzipSync, gzipSync } from 'node:zlib'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import { bundleRun, restoreRun } from '../../bench/run-bundle.ts'
import { createLocalEngine, type Engine } from '../../engine/index.ts'
import type { RunConfig } from '../../seed/config.ts'
import { type ArtifactStore, listAll } from '../../store/artifact-store.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { keys } from '../../store/keys.ts'
import { type MicroRun, runMicro } from '../activities/micro-run.ts'
import { microConfig } from '../compute/micro.ts'

const RUN = 'bundle-run'

/** Every object of run `runId` with its recorded sha256, by key. */
async function objectsOf(store: ArtifactStore, runId: string): Promise<Map<string, string>> {
  const out = new Map<string, string>()
  for await (const entry of listAll(store, keys.runPrefix(runId))) {
    out.set(entry.key, (await store.head(entry.key))?.sha256 ?? '')
  }
  return out
}

/** An engine that fails the test if anything asks it for work: a restored run must not train or decode again. */
const refusingEngine = new Proxy({} as Engine, {
  get: (_target, name) => () => {
    throw new Error(`the engine was asked to ${String(name)}: a restored phase was recomputed`)
  },
})

describe('run bundles (a benchmark seed shared start, carried between machines)', () => {
  let root: string
  let trained: FsArtifactStore
  let first: MicroRun
  let config: RunConfig
  let file: string

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-bundle-'))
    trained = new FsArtifactStore(join(root, 'trained'))
    const engine = createLocalEngine({ threads: 1 })
    const c = microConfig('seed')
    config = { ...c, stage2: { ...c.stage2, iterations: 0 }, evaluation: { ...c.evaluation, tasks: 2 } }
    first = await runMicro(createPipelineActivities({ store: trained, engine }), RUN, config)
    await engine.close()
    await trained.put('runs/other-run/run.json', Buffer.from('{}'))
    file = join(root, 'starts', `${RUN}.jsonl.gz`)
  })
  after(async () => {
    await rm(root, { recursive: true, force: true })
  })

  it('restores every object of the run, and only those, and the pipeline then reuses them all', async () => {
    const bundled = await bundleRun(trained, RUN, file)
    const expected = await objectsOf(trained, RUN)
    assert.equal(bundled.objects, expected.size)
    assert.ok(expected.size > 5, `a micro run stores more than ${expected.size} objects`)

    const fresh = new FsArtifactStore(join(root, 'fresh'))
    const restored = await restoreRun(fresh, file)
    assert.deepEqual({ written: restored.written, kept: restored.kept }, { written: expected.size, kept: 0 })
    assert.deepEqual(await objectsOf(fresh, RUN), expected)
    assert.deepEqual(await objectsOf(fresh, 'other-run'), new Map())

    // the same run again, on the restored store, with an engine that refuses all work: every phase is reused
    const again = await runMicro(createPipelineActivities({ store: fresh, engine: refusingEngine }), RUN, config)
    assert.equal(again.base.sha256, first.base.sha256)
    assert.equal(again.stage1.sha256, first.stage1.sha256)
    assert.deepEqual(await objectsOf(fresh, RUN), expected, 'the rerun wrote nothing new')

    const twice = await restoreRun(fresh, file)
    assert.deepEqual({ written: twice.written, kept: twice.kept }, { written: 0, kept: expected.size })
  })

  it('refuses a damaged bundle before writing anything, and never overwrites other bytes', async () => {
    await bundleRun(trained, RUN, file)
    const lines = gunzipSync(await readFile(file))
      .toString('utf8')
      .split('\n')
      .filter(Boolean)
    const last = JSON.parse(lines.at(-1) as string) as { data: string }
    const flipped = Buffer.from(last.data, 'base64')
    flipped[0] = (flipped[0] as number) ^ 1
    lines[lines.length - 1] = JSON.stringify({ ...last, data: flipped.toString('base64') })
    const damaged = join(root, 'damaged.jsonl.gz')
    await writeFile(damaged, gzipSync(`${lines.join('\n')}\n`))
    const empty = new FsArtifactStore(join(root, 'empty'))
    await assert.rejects(restoreRun(empty, damaged), /does not match its recorded sha256/)
    assert.deepEqual(await objectsOf(empty, RUN), new Map())

    const clashing = new FsArtifactStore(join(root, 'clashing'))
    const planKey = [...(await objectsOf(trained, RUN)).keys()].find((k) => k.endsWith('plan.json')) as string
    await clashing.put(planKey, Buffer.from('{"another":"run"}'))
    await assert.rejects(restoreRun(clashing, file), /exists .* with other bytes/)
    assert.equal((await clashing.get(planKey)).toString(), '{"another":"run"}')
  })

  it('refuses to bundle a run the store does not hold', async () => {
    await assert.rejects(bundleRun(trained, 'no-such-run', join(root, 'none.jsonl.gz')), /has no objects/)
  })
})
