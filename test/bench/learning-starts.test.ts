import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import type { LearningResults } from '../../bench/learning-report.ts'
import {
  type Checkpoints,
  checkpointsOf,
  checkStart,
  readStartsRecord,
  STARTS_RECORD,
  StartMismatchError,
  type StartRecord,
  StartsRecordError,
  startsCache,
  storedCheckpoints,
  withStart,
} from '../../bench/learning-starts.ts'
import { bundleRun, readBundle } from '../../bench/run-bundle.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'

const A = 'a'.repeat(64)
const B = 'b'.repeat(64)
const C = 'c'.repeat(64)
const D = 'd'.repeat(64)
const RUN = 'lb-test-s1-stage1'

function recordOf(checkpoints: Checkpoints, configSha256 = D): StartRecord {
  return {
    env: 'household',
    seed: 1,
    kind: 'stage1',
    runId: RUN,
    forkedFrom: 'lb-test-s1-base',
    ortThreads: 1,
    regenerate: 'npm run bench:learning -- --regenerate-starts --envs household --seeds 1 --start-runs stage1',
    madeBy: 'a test',
    configSha256,
    checkpoints,
    history: [],
  }
}

describe('learning starts: checkpoints checked against their record', () => {
  const recorded = {
    base: { 'model.safetensors': A, 'config.json': C },
    sft: { 'model.safetensors': B, 'config.json': C },
  }

  it('accepts a start whose checkpoints are the recorded ones', () => {
    assert.doesNotThrow(() =>
      checkStart(recordOf(recorded), { checkpoints: structuredClone(recorded), configSha256: D }, 'regenerated'),
    )
  })

  it('refuses a start whose checkpoint differs, naming both hashes', () => {
    const regenerated = { ...recorded, sft: { 'model.safetensors': C, 'config.json': C } }
    assert.throws(
      () => checkStart(recordOf(recorded), { checkpoints: regenerated, configSha256: A }, 'regenerated'),
      (error: unknown) => {
        assert.ok(error instanceof StartMismatchError)
        assert.equal(error.name, 'StartMismatchError')
        assert.match(
          error.message,
          new RegExp(`^start ${RUN} \\(regenerated, config ${A}, recorded with config ${D}\\) is not the one in `),
        )
        assert.ok(error.message.includes(`sft/checkpoint/model.safetensors: sha256 ${C} regenerated, ${B} recorded`))
        assert.ok(!error.message.includes('base/checkpoint'), 'only the differing file is named')
        return true
      },
    )
  })

  it('refuses a start that lacks a recorded checkpoint file or holds one the record does not name', () => {
    const got = { base: recorded.base, sft: { 'config.json': C, 'optimizer.safetensors': A } }
    assert.throws(
      () => checkStart(recordOf(recorded), { checkpoints: got, configSha256: D }, 'in x.jsonl.gz'),
      (error: unknown) =>
        error instanceof StartMismatchError &&
        error.message.includes('the same config') &&
        error.message.includes(`sft/checkpoint/model.safetensors: sha256 (missing) in x.jsonl.gz, ${B} recorded`) &&
        error.message.includes(
          `sft/checkpoint/optimizer.safetensors: sha256 ${A} in x.jsonl.gz, (not recorded) recorded`,
        ),
    )
  })

  it("reads a run's checkpoints from its object keys, and only its own", () => {
    const objects = [
      { key: `runs/${RUN}/sft/checkpoint/model.safetensors`, sha256: B },
      { key: `runs/${RUN}/base/checkpoint/model.safetensors`, sha256: A },
      { key: `runs/${RUN}/sft/annotations.jsonl`, sha256: C },
      { key: `runs/${RUN}-other/sft/checkpoint/model.safetensors`, sha256: D },
    ]
    assert.deepEqual(checkpointsOf(RUN, objects), {
      base: { 'model.safetensors': A },
      sft: { 'model.safetensors': B },
    })
  })

  it('replaces a reference only when asked, keeping the old one in the history', () => {
    const first = withStart(readStartsRecord('/nonexistent/record.json'), recordOf(recorded), false)
    assert.throws(() => withStart(first, recordOf({ sft: { 'model.safetensors': C } }), false), StartsRecordError)
    const second = withStart(first, { ...recordOf({ sft: { 'model.safetensors': C } }), madeBy: 'a rerun' }, true)
    const start = second.starts[RUN] as StartRecord
    assert.equal(start.madeBy, 'a rerun')
    assert.deepEqual(start.checkpoints, { sft: { 'model.safetensors': C } })
    assert.deepEqual(start.history, [{ madeBy: 'a test', configSha256: D, checkpoints: recorded }])
  })

  it('keeps the cache outside the tree, under SEEDFLOW_CACHE_DIR', () => {
    assert.equal(startsCache({ SEEDFLOW_CACHE_DIR: '/x/cache' }), '/x/cache/learning-starts')
    assert.equal(startsCache({ XDG_CACHE_HOME: '/x/xdg' }), '/x/xdg/seedflow/learning-starts')
  })
})

describe('learning starts: a bundled run checked against its record', () => {
  let root: string
  let store: FsArtifactStore
  let file: string
  let recorded: Checkpoints

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-starts-'))
    store = new FsArtifactStore(join(root, 'store'))
    await store.put(`runs/${RUN}/run.json`, Buffer.from('{"configSha256":"x"}'))
    await store.put(`runs/${RUN}/base/checkpoint/model.safetensors`, Buffer.from('base weights'))
    await store.put(`runs/${RUN}/sft/checkpoint/model.safetensors`, Buffer.from('stage 1 weights'))
    await store.put(`runs/${RUN}/sft/checkpoint/config.json`, Buffer.from('{}'))
    recorded = await storedCheckpoints(store, RUN)
    file = join(root, 'starts', `${RUN}.jsonl.gz`)
    await bundleRun(store, RUN, file)
  })
  after(async () => {
    await rm(root, { recursive: true, force: true })
  })

  it('the bundle holds the checkpoints the store recorded, and passes the check', () => {
    assert.deepEqual(Object.keys(recorded), ['base', 'sft'])
    const bundle = readBundle(file)
    assert.doesNotThrow(() =>
      checkStart(recordOf(recorded), { checkpoints: checkpointsOf(RUN, bundle.objects), configSha256: D }, 'bundled'),
    )
  })

  it('a bundle whose Stage 1 weights were made otherwise is refused', async () => {
    const other = new FsArtifactStore(join(root, 'other'))
    await other.put(`runs/${RUN}/base/checkpoint/model.safetensors`, Buffer.from('base weights'))
    await other.put(`runs/${RUN}/sft/checkpoint/model.safetensors`, Buffer.from('stage 1 weights, other bits'))
    await other.put(`runs/${RUN}/sft/checkpoint/config.json`, Buffer.from('{}'))
    const otherFile = join(root, 'other.jsonl.gz')
    await bundleRun(other, RUN, otherFile)
    const got = checkpointsOf(RUN, readBundle(otherFile).objects)
    const want = recorded.sft?.['model.safetensors'] as string
    const was = got.sft?.['model.safetensors'] as string
    assert.notEqual(want, was)
    assert.throws(
      () => checkStart(recordOf(recorded), { checkpoints: got, configSha256: D }, 'bundled'),
      (error: unknown) =>
        error instanceof StartMismatchError &&
        error.message.includes(`sft/checkpoint/model.safetensors: sha256 ${was} bundled, ${want} recorded`),
    )
  })
})

describe('learning starts: the committed record', () => {
  const record = readStartsRecord(STARTS_RECORD)
  /** The results file whose rows start from `start` (bench/learning-starts.ts `StartRecord.results`), if known. */
  const resultsFile = (start: StartRecord) =>
    start.results ?? (start.runId.startsWith('lb-') ? 'bench/results/learning.json' : undefined)

  it('records a model checkpoint of every start made at one thread, with the command that regenerates it', () => {
    assert.ok(Object.keys(record.starts).length > 0)
    for (const [id, start] of Object.entries(record.starts)) {
      assert.equal(start.runId, id)
      assert.equal(start.ortThreads, 1)
      assert.match(start.regenerate, new RegExp(`--regenerate-starts --envs ${start.env} --seeds ${start.seed} `))
      const own = start.kind === 'base' ? 'base' : 'sft'
      assert.match(start.checkpoints[own]?.['model.safetensors'] ?? '', /^[0-9a-f]{64}$/, `${id}: ${own}`)
    }
  })

  it('names the checkpoints that the committed results evaluated as their warm-start and Stage 1', () => {
    // the recorded starts per results file, env, seed and kind (a seed may have several Stage 1 starts,
    // `--stage1-set`, of which the rows use one)
    const groups = new Map<string, { file: string; start: StartRecord; starts: StartRecord[] }>()
    for (const start of Object.values(record.starts)) {
      const file = resultsFile(start)
      if (!file || !existsSync(file)) continue
      const at = JSON.stringify([file, start.env, start.seed, start.kind])
      const group = groups.get(at) ?? { file, start, starts: [] }
      group.starts.push(start)
      groups.set(at, group)
    }
    const modelOf = (s: StartRecord) => s.checkpoints[s.kind === 'base' ? 'base' : 'sft']?.['model.safetensors']
    const results = new Map<string, LearningResults>()
    let checked = 0
    for (const { file, start, starts } of groups.values()) {
      if (!results.has(file)) results.set(file, JSON.parse(readFileSync(file, 'utf8')) as LearningResults)
      const label = start.kind === 'base' ? 'warm-start' : 'stage1'
      const evaluated = new Set<string>()
      for (const bySeed of Object.values(results.get(file)?.[start.env] ?? {})) {
        for (const e of bySeed[String(start.seed)] ?? [])
          if (e.checkpoint === label && e.checkpointSha256) evaluated.add(e.checkpointSha256)
      }
      const known = new Set(starts.map(modelOf))
      for (const sha of evaluated) {
        assert.ok(
          known.has(sha),
          `${file} ${start.env} seed ${start.seed}: its ${label} ${sha} is none of ${starts.map((s) => s.runId)}`,
        )
        checked++
      }
    }
    assert.ok(checked > 0, 'no recorded start is one the committed results used')
  })
})
