// Stage 1's annotation on the run page (issue 40 item 10): "annotated N of M trajectories", a warning with the
// failures' reasons where the annotator left trajectories without a skill, read from the Stage 1 manifest's
// counts and the annotations file it lists.
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import type { SkillRecord } from '../../compute/analyze.ts'
import { createLocalEngine } from '../../engine/index.ts'
import type { PhaseManifest } from '../../records/phase-manifest.ts'
import { parseSkillLines } from '../../records/skill-library.ts'
import { readRunData } from '../../report/run-data.ts'
import { runPage } from '../../report/run-page.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { getJson, putJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import { runMicro } from '../activities/micro-run.ts'
import { microConfig } from '../compute/micro.ts'

const RUN = 'annotated-run'
const engine = createLocalEngine({ threads: 1 })
const links = { skills: (run: string, k: number) => `${run}/iteration-${k}.html` }
const MANIFEST = keys.stagePhaseManifest(RUN, 'sft', 0)
const REFUSED = 'HTTP 401 from api.example.com after 3 tries: invalid api key'

/** The page's Stage 1 annotation line. */
function annotationLine(page: string): string {
  const at = page.indexOf('<p class="annotation')
  assert.ok(at >= 0, 'the page has an annotation line')
  return page.slice(at, page.indexOf('</p>', at) + 4)
}

describe("the run page's Stage 1 annotation counts", () => {
  let root: string
  let store: FsArtifactStore
  let manifest: PhaseManifest
  let records: SkillRecord[]

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-annotation-'))
    store = new FsArtifactStore(join(root, 'store'))
    const c = microConfig('seed')
    await runMicro(createPipelineActivities({ store, engine }), RUN, { ...c, stage2: { ...c.stage2, iterations: 1 } })
    manifest = (await getJson(store, MANIFEST)) as PhaseManifest
    const file = manifest.outputs.annotations
    assert.ok(file)
    records = parseSkillLines((await store.get(file.key)).toString('utf8'), file.key)
    assert.ok(records.length >= 4 && records.every((r) => r.ok), 'the oracle annotated every trajectory')
  })
  after(async () => {
    await engine.close()
    await rm(root, { recursive: true, force: true })
  })

  /** Rewrites the annotations (the first two without an answer, the third unparsed) and the manifest's counts. */
  async function withFailures<T>(body: () => Promise<T>): Promise<T> {
    const file = manifest.outputs.annotations
    assert.ok(file)
    const failed = records.map((r, i): SkillRecord => {
      if (i < 2)
        return {
          ...r,
          ok: false,
          summary: null,
          skill: null,
          raw: '',
          failure: { code: 'request-failed', reason: REFUSED },
        }
      if (i === 2)
        return {
          ...r,
          ok: false,
          summary: null,
          skill: null,
          raw: 'sorry',
          failure: { code: 'no-json-object', reason: "no '{' in an answer of 5 characters" },
        }
      return r
    })
    const original = await store.get(file.key)
    const info = await store.put(file.key, Buffer.from(failed.map((r) => `${JSON.stringify(r)}\n`).join('')))
    const stats = { ...manifest.stats, annotated: records.length - 3, unparsed: 1, requestFailures: 2 }
    await putJson(store, MANIFEST, { ...manifest, outputs: { ...manifest.outputs, annotations: info }, stats })
    try {
      return await body()
    } finally {
      await store.put(file.key, original)
      await putJson(store, MANIFEST, manifest)
    }
  }

  it('says how many trajectories Stage 1 annotated, not as a warning when all were', async () => {
    const run = await readRunData(store, RUN)
    const n = records.length
    assert.deepEqual(run.annotation, {
      phase: 'sft',
      trajectories: n,
      annotated: n,
      failed: 0,
      requestFailures: 0,
      unparsed: 0,
      failures: [],
    })
    assert.equal(
      annotationLine(await runPage([run], { links })),
      `<p class="annotation" data-run="${RUN}"><strong>${RUN}</strong>: <span class="status-ok">Stage 1 (sft): annotated ${n} of ${n} trajectories</span></p>`,
    )
  })

  it('warns when the annotator left trajectories without a skill, with the recorded reasons', async () => {
    const n = records.length
    const page = await withFailures(async () => runPage([await readRunData(store, RUN)], { links }))
    assert.equal(
      annotationLine(page),
      `<p class="annotation notice-bad" data-run="${RUN}"><strong>${RUN}</strong>: <span class="status-bad">` +
        `Stage 1 (sft): annotated ${n - 3} of ${n} trajectories (3 failed: ` +
        `2 without an answer from the annotator, e.g. “${REFUSED}”; ` +
        `1 unparsed (no-json-object), e.g. “no &#39;{&#39; in an answer of 5 characters”)</span></p>`,
    )
  })

  it('falls back to the manifest counts when the annotations file cannot be read, and names it', async () => {
    const file = manifest.outputs.annotations
    assert.ok(file)
    const run = await withFailures(async () => {
      await store.put(file.key, Buffer.from('not the file the manifest lists\n'))
      return readRunData(store, RUN)
    })
    assert.deepEqual(
      run.damaged.map((d) => d.key),
      [file.key],
    )
    assert.match(run.damaged[0]?.reason ?? '', /^IntegrityError: .*not the artifact the reader was handed/)
    assert.match(
      annotationLine(await runPage([run], { links })),
      /annotated \d+ of \d+ trajectories \(3 failed: 2 without an answer from the annotator, 1 unparsed; no reasons recorded\)/,
    )
  })
})
