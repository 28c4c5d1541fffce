// The report of a damaged run (issue 40 item 4): one bit flipped in a stored artifact, same size, so the folder
// store's sha256 check refuses it. `seedflow report` writes the report anyway, names each artifact it could not
// read on the page and in a warning line, and exits 0; `seedflow ui` serves the same pages.
import assert from 'node:assert/strict'
import { mkdtemp, open, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { runScalars } from '../../exports/tensorboard-run.ts'
import { DamagedRunError } from '../../report/damage.ts'
import { readRunData } from '../../report/run-data.ts'
import { runPage } from '../../report/run-page.ts'
import { type IterationSkills, readIterationSkills } from '../../report/skill-data.ts'
import { startUiServer } from '../../report/ui-server.ts'
import { writeReport } from '../../report/write-report.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { keys } from '../../store/keys.ts'
import { runMicro } from '../activities/micro-run.ts'
import { seedflow } from '../cli/seedflow-process.ts'
import { microConfig } from '../compute/micro.ts'

const RUN = 'damaged-run'
const engine = createLocalEngine({ threads: 1 })
const ROLLOUT = keys.rollouts(RUN, 0, 0)
const INTEGRITY =
  /^IntegrityError: integrity check failed for (\S+): recorded sha256 [0-9a-f]{64}, read sha256 [0-9a-f]{64}$/

/** Flips one bit in the middle of the stored file (same size, same inode); the returned function flips it back. */
async function flipBit(store: FsArtifactStore, key: string): Promise<() => Promise<void>> {
  const path = join(store.root, key)
  const flip = async () => {
    const file = await open(path, 'r+')
    try {
      const { size } = await file.stat()
      const at = Math.floor(size / 2)
      const byte = Buffer.alloc(1)
      await file.read(byte, 0, 1, at)
      byte[0] = (byte[0] as number) ^ 0x10
      await file.write(byte, 0, 1, at)
    } finally {
      await file.close()
    }
  }
  await flip()
  return flip
}

/** Flips a bit in each key for the length of `body`, then restores them. */
async function damaged<T>(store: FsArtifactStore, damagedKeys: string[], body: () => Promise<T>): Promise<T> {
  const restores = []
  for (const key of damagedKeys) restores.push(await flipBit(store, key))
  try {
    return await body()
  } finally {
    for (const restore of restores) await restore()
  }
}

/** The page less what differs between two makings of it: the damage notice and the time it was made. */
const comparable = (page: string) =>
  page.replace(/<section class="notice-bad"[\s\S]*?<\/section>/g, '').replace(/Made [0-9TZ:.-]+ from/, 'Made from')

describe('the report of a run with a damaged artifact (folder store, one bit flipped)', () => {
  let root: string
  let store: FsArtifactStore

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-damaged-'))
    store = new FsArtifactStore(join(root, 'store'))
    const c = microConfig('seed-oracle') // its teacher reads the oracle skill: token colours to lose
    await runMicro(createPipelineActivities({ store, engine }), RUN, {
      ...c,
      stage2: { ...c.stage2, iterations: 2 },
      evaluation: { ...c.evaluation, every: 1 },
    })
  })
  after(async () => {
    await engine.close()
    await rm(root, { recursive: true, force: true })
  })

  it('writes the report with a corrupt rollout: the rest as usual, the rollout named on the run page and its skill page', async () => {
    const intact = await writeReport(store, [RUN], join(root, 'intact'), { trajectories: 4 })
    assert.deepEqual(intact.damaged, [])
    const written = await damaged(store, [ROLLOUT], () =>
      writeReport(store, [RUN], join(root, 'damaged'), { trajectories: 4 }),
    )
    assert.deepEqual(
      written.damaged.map((d) => [d.runId, d.key]),
      [[RUN, ROLLOUT]],
    )
    assert.equal(INTEGRITY.exec(written.damaged[0]?.reason ?? '')?.[1], ROLLOUT)
    assert.equal(written.pages.length, 2)

    const index = await readFile(written.index, 'utf8')
    const notice = index.slice(index.indexOf('<section class="notice-bad"'), index.indexOf('</section>') + 10)
    assert.match(notice, new RegExp(`One artifact of run ${RUN} could not be read`))
    assert.ok(notice.includes(`<li><code>${ROLLOUT}</code>: IntegrityError: integrity check failed for ${ROLLOUT}`))
    assert.ok(notice.includes(`npx seedflow audit ${RUN}`))
    assert.equal(comparable(index), comparable(await readFile(intact.index, 'utf8')), 'the rest of the page as usual')

    const [first, second] = written.pages
    assert.ok(first && second)
    assert.ok((await readFile(first, 'utf8')).includes(`<li><code>${ROLLOUT}</code>`))
    assert.doesNotMatch(await readFile(second, 'utf8'), /<section class="notice-bad"/)
  })

  it('reads a run whose run.json, a metrics file and an evaluation are corrupt: each named, the rest shown', async () => {
    const broken = [keys.runRecord(RUN), keys.metrics(RUN, 1), keys.stageEvaluation(RUN, 'stage1')]
    const run = await damaged(store, broken, () => readRunData(store, RUN))
    assert.deepEqual(
      run.damaged.map((d) => INTEGRITY.exec(d.reason)?.[1]),
      broken,
    )
    assert.deepEqual(
      run.iterations.map((it) => it.iteration),
      [0],
    )
    assert.deepEqual(
      run.evaluations.map((e) => `${e.kind}:${e.iteration}`),
      ['base:-1', 'iteration:0', 'iteration:1'],
    )
    const page = await runPage([run], { links: { skills: (r, k) => `${r}/${k}.html` } })
    assert.match(page, new RegExp(`3 artifacts of run ${RUN} could not be read`))
    for (const key of broken) assert.ok(page.includes(`<li><code>${key}</code>: IntegrityError`), key)
    assert.match(page, /1 of 2 iterations complete/)
  })

  it('leaves the TensorBoard export refusing a damaged run, naming the artifact (an export leaves nothing out)', async () => {
    const metrics = keys.metrics(RUN, 1)
    await damaged(store, [metrics], () =>
      assert.rejects(runScalars(store, RUN), (error: Error) => {
        assert.ok(error instanceof DamagedRunError)
        assert.ok(error.message.startsWith(`run ${RUN}: 1 artifact cannot be read: ${metrics} (IntegrityError: `))
        return true
      }),
    )
  })

  it('keeps what a skill page can read of an iteration with a corrupt rescore file', async () => {
    const rescore = keys.rescore(RUN, 0, 0)
    const shifts = (d: IterationSkills) =>
      d.trajectories.flatMap((t) => t.steps.flatMap((s) => s.tokens.map((k) => k.shift)))
    assert.ok(shifts(await readIterationSkills(store, RUN, 0, { limit: 100 })).some((x) => x !== null))
    const data = await damaged(store, [rescore], () => readIterationSkills(store, RUN, 0, { limit: 100 }))
    assert.deepEqual(
      data.damaged.map((d) => d.key),
      [rescore],
    )
    assert.ok(data.trajectories.length > 0)
    assert.ok(shifts(data).every((x) => x === null))
  })

  it('`seedflow report` exits 0, writes index.html and prints a warning naming the damaged artifact (a run named twice shown once)', async () => {
    const out = join(root, 'cli-report')
    const r = await damaged(store, [ROLLOUT], () =>
      seedflow(['report', RUN, RUN, '--out', out], {
        SEEDFLOW_ARTIFACTS_DIR: store.root,
        SEEDFLOW_HOME: join(root, 'home'),
        SEEDFLOW_S3_BUCKET: undefined,
        TEMPORAL_ADDRESS: undefined,
        TEMPORAL_PROFILE: undefined,
        TEMPORAL_CONFIG_FILE: undefined,
      }),
    )
    assert.equal(r.code, 0, `exit ${r.code}\n${r.out}\n${r.err}`)
    assert.match(r.out, new RegExp(`report of ${RUN} in .*/cli-report/index\\.html \\(2 skill pages\\)`))
    assert.equal(
      r.err.trim(),
      `seedflow: warning: 1 damaged artifact could not be read and is left out of the report (named on its page): ${ROLLOUT}; check with npx seedflow audit ${RUN}`,
    )
    assert.ok((await readFile(join(out, 'index.html'), 'utf8')).includes(`<li><code>${ROLLOUT}</code>`))
  })

  it('`seedflow ui` serves the pages of a damaged run with the same notices', async () => {
    const logged: string[] = []
    const ui = await startUiServer({
      store,
      host: '127.0.0.1',
      port: 0,
      trajectories: 4,
      refreshSeconds: 7,
      log: (line) => logged.push(line),
    })
    try {
      const get = async (path: string) => {
        const res = await fetch(new URL(path, ui.url))
        return { status: res.status, text: await res.text() }
      }
      const skills = await damaged(store, [ROLLOUT], () => get(`/runs/${RUN}/iterations/0`))
      assert.equal(skills.status, 200)
      assert.ok(skills.text.includes(`<li><code>${ROLLOUT}</code>: IntegrityError`))
      const [run, index] = await damaged(store, [keys.runRecord(RUN)], async () => [
        await get(`/runs/${RUN}/`),
        await get('/'),
      ])
      assert.equal(run?.status, 200)
      assert.ok(run?.text.includes(`<li><code>${keys.runRecord(RUN)}</code>: IntegrityError`))
      assert.equal(index?.status, 200)
      assert.match(index?.text ?? '', /run\.json cannot be read: IntegrityError: integrity check failed/)
      assert.deepEqual(logged, [])
    } finally {
      await ui.close()
    }
  })
})
