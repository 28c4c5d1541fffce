// The pipeline activities called directly on the filesystem store: the failures that no retry can fix come
// back as non-retryable ApplicationFailures named by type. (The end-to-end run is test/integration/pipeline.)
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { ApplicationFailure } from '@temporalio/common'
import { PhaseCounters } from '../../activities/phase.ts'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import { loadPolicy } from '../../compute/index.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { trainByteLevelBpe } from '../../policy/bpe-trainer.ts'
import { loadCheckpoint } from '../../records/checkpoint-store.ts'
import type { PipelineActivities, RunRef, StageSummary } from '../../records/contracts.ts'
import type { IterationMetricsRecord } from '../../records/iteration-metrics.ts'
import type { RunConfig } from '../../seed/config.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { getJson, putJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import type { Manifest } from '../../store/manifest.ts'
import { importedFixtureFolder, microConfig, microImportedConfig } from '../compute/micro.ts'

const engine = createLocalEngine({ threads: 1 })

async function failure(promise: Promise<unknown>): Promise<ApplicationFailure> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  assert.ok(error instanceof ApplicationFailure, `expected an ApplicationFailure, got ${String(error)}`)
  return error
}

describe('pipeline activities on the filesystem store', () => {
  let root: string
  let store: FsArtifactStore
  let counters: PhaseCounters
  let acts: PipelineActivities
  let run: RunRef
  let base: StageSummary

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-pipeline-'))
    store = new FsArtifactStore(root)
    counters = new PhaseCounters()
    acts = createPipelineActivities({ store, engine, counters })
    ;({ run } = await acts.planRun({ runId: 'unit-run', config: microConfig('grpo') }))
    base = await acts.prepare({ run })
  })

  after(async () => {
    await engine.close()
    await rm(root, { recursive: true, force: true })
  })

  it('planRun: a bad config is InvalidRunConfig listing every path, and nothing is recorded', async () => {
    const bad = { ...microConfig(), env: 'chess', threads: -2 }
    const f = await failure(acts.planRun({ runId: 'bad-run', config: bad }))
    assert.equal(f.type, 'InvalidRunConfig')
    assert.equal(f.nonRetryable, true)
    assert.match(f.message, /env: /)
    assert.match(f.message, /threads: /)
    assert.equal(await store.head(keys.runRecord('bad-run')), undefined)
  })

  it('prepare: the warm-started base checkpoint is reused on a second call', async () => {
    assert.equal(base.reused, false)
    assert.equal(
      (await store.head(keys.baseCheckpoint('unit-run', 'model.safetensors')))?.sha256,
      base.checkpoint.sha256,
    )
    const again = await acts.prepare({ run })
    assert.equal(again.reused, true)
    assert.deepEqual(again.checkpoint, base.checkpoint)
    assert.equal(counters.reused.get('warmstart'), 1)
  })

  it('rollout: a snapshot that is not one is CorruptArtifact; a checkpoint whose weights changed is IntegrityError', async () => {
    const bogus = await putJson(store, keys.snapshot('unit-run', 0), { hello: 'world' })
    const f = await failure(acts.rollout({ run, iteration: 0, shard: 0, snapshot: bogus }))
    assert.equal(f.type, 'CorruptArtifact')
    assert.equal(f.nonRetryable, true)

    const wrong = { ...base.checkpoint, sha256: '0'.repeat(64) }
    const snapshot = await acts.snapshot({ run, iteration: 1, acting: wrong, reference: wrong, analyzer: null })
    const g = await failure(acts.rollout({ run, iteration: 1, shard: 0, snapshot }))
    assert.equal(g.type, 'IntegrityError')
    assert.equal(g.nonRetryable, true)
  })

  it('a run record of another config under the same run id is RunConfigConflict', async () => {
    const f = await failure(acts.prepare({ run: { ...run, configSha256: 'e'.repeat(64) } }))
    assert.equal(f.type, 'RunConfigConflict')
  })

  it('update: a rescore artifact that is not one is CorruptArtifact naming its key', async () => {
    const snapshot = await acts.snapshot({
      run,
      iteration: 2,
      acting: base.checkpoint,
      reference: base.checkpoint,
      analyzer: null,
    })
    const key = keys.rescore('unit-run', 2, 0)
    const info = await store.put(key, Buffer.from('SEEDRESC\x01\x00\x00\x00', 'latin1'))
    const f = await failure(acts.update({ run, iteration: 2, snapshot, rollouts: [], rescore: info }))
    assert.equal(f.type, 'CorruptArtifact')
    assert.equal(f.nonRetryable, true)
    assert.equal(f.message, `update: ${key}: truncated: 12 bytes, the preamble needs 16`)
  })

  it('recordIteration: metrics.json with the OPD gate over the distilled tokens, then manifest.json (seed-library)', async () => {
    const { run: lib } = await acts.planRun({ runId: 'library-run', config: microConfig('seed-library') })
    const sft = (await acts.stage1({ run: lib, base: (await acts.prepare({ run: lib })).checkpoint })).checkpoint
    const snapshot = await acts.snapshot({ run: lib, iteration: 0, acting: sft, reference: sft, analyzer: null })
    const rolled = await acts.rollout({ run: lib, iteration: 0, shard: 0, snapshot })
    const rollouts = [rolled.outputs.rollouts!]
    const scored = await acts.rescore({ run: lib, iteration: 0, snapshot, rollouts, skills: [] })
    const next = await acts.update({ run: lib, iteration: 0, snapshot, rollouts, rescore: scored.outputs.rescore! })
    const input = {
      run: lib,
      iteration: 0,
      algorithm: 'seed-library',
      snapshot,
      manifests: {
        rollout: [rolled.manifestKey],
        analyze: [],
        rescore: [scored.manifestKey],
        update: [next.manifestKey],
      },
    }
    const recorded = await acts.recordIteration(input)
    const record = (await getJson(store, keys.metrics('library-run', 0))) as IterationMetricsRecord
    const m = record.metrics
    assert.ok(m['update/opd_tokens']! > 0, 'every trajectory has a library teacher')
    assert.equal(m['update/opd_gate_mean'], next.stats.opdGateMean)
    assert.ok(m['update/opd_gate_mean']! > 0 && m['update/opd_gate_mean']! < 1)
    assert.ok(m['update/opd_positive_gap_share']! >= 0 && m['update/opd_positive_gap_share']! <= 1)
    assert.equal(m['rescore/teacher_samples'], m['rescore/samples'])
    assert.equal(m['analyze/parse_rate'], null, 'the row does not analyze')
    assert.equal(recorded.stats['update/opd_gate_mean'], m['update/opd_gate_mean'])
    assert.equal(recorded.manifest.key, keys.iterationManifest('library-run', 0))

    const manifest = (await getJson(store, recorded.manifest.key)) as Manifest
    const metricsManifest = keys.phaseManifest('library-run', 0, 'metrics', 0)
    assert.deepEqual(
      manifest.artifacts[keys.metrics('library-run', 0)]?.parents.sort(),
      [...[rolled.manifestKey, scored.manifestKey, next.manifestKey], keys.snapshot('library-run', 0)].sort(),
    )
    assert.deepEqual(manifest.artifacts[metricsManifest]?.parents, [keys.metrics('library-run', 0)])
    assert.ok(
      manifest.artifacts[keys.rescore('library-run', 0, 0)]?.parents.includes(keys.sftAnnotations('library-run')),
    )

    const again = await acts.recordIteration(input)
    assert.equal(again.reused, true)
    assert.deepEqual(again.manifest, recorded.manifest)
  })

  it('rescore: the controlGap diagnostic scores the control prompt under the student gate and changes no update', async () => {
    const iterate = async (runId: string, controlGap: boolean, stage2: Partial<RunConfig['stage2']> = {}) => {
      const c = microConfig('seed-oracle')
      const config = { ...c, stage2: { ...c.stage2, ...(controlGap ? { controlGap } : {}), ...stage2 } }
      const { run: r } = await acts.planRun({ runId, config })
      const sft = (await acts.stage1({ run: r, base: (await acts.prepare({ run: r })).checkpoint })).checkpoint
      const snapshot = await acts.snapshot({ run: r, iteration: 0, acting: sft, reference: sft, analyzer: null })
      const rollouts = [(await acts.rollout({ run: r, iteration: 0, shard: 0, snapshot })).outputs.rollouts!]
      const scored = await acts.rescore({ run: r, iteration: 0, snapshot, rollouts, skills: [] })
      const next = await acts.update({ run: r, iteration: 0, snapshot, rollouts, rescore: scored.outputs.rescore! })
      return { scored: scored.stats, update: next.stats }
    }
    const plain = await iterate('oracle-plain', false)
    const measured = await iterate('oracle-control-gap', true)
    assert.equal(plain.scored.controlGapExpertSamples, undefined, 'no control prompt without the diagnostic')
    const controlled = (measured.scored.controlGapExpertSamples ?? 0) + (measured.scored.controlGapOtherSamples ?? 0)
    assert.ok(controlled > 0, `control gap over ${controlled} samples`)
    assert.ok(Number.isFinite(measured.scored.controlGapExpert) && Number.isFinite(measured.scored.controlGapOther))
    const { seconds: _a, ...plainUpdate } = plain.update
    const { seconds: _b, ...measuredUpdate } = measured.update
    assert.deepEqual(measuredUpdate, plainUpdate, 'the student gate never reads the control log-probs')
    // the oracle planning from each step's state runs through the phase; the micro policy's responses give no
    // move (no expert samples), and a response that moves nothing leaves the plan as it was: the same teacher
    const stepped = await iterate('oracle-step-plan', false, { oraclePlan: 'step' })
    assert.equal(plain.scored.teacherGapExpertSamples, 0)
    assert.equal(stepped.scored.teacherSamples, plain.scored.teacherSamples)
    assert.equal(stepped.scored.teacherGapOther, plain.scored.teacherGapOther)
  })

  it('prepare: a missing model folder fails for good, naming the path', async () => {
    const folder = join(root, 'no-such-model')
    const { run: r } = await acts.planRun({ runId: 'missing-folder', config: microImportedConfig('grpo', folder) })
    const f = await failure(acts.prepare({ run: r }))
    assert.equal(f.type, 'ModelImportError')
    assert.equal(f.nonRetryable, true)
    assert.ok(f.message.includes(folder), f.message)
  })

  it('prepare: an imported folder becomes the base checkpoint (chat template kept), reused until a file changes', async () => {
    const folder = await importedFixtureFolder()
    try {
      const { run: r } = await acts.planRun({ runId: 'imported-run', config: microImportedConfig('grpo', folder) })
      const first = await acts.prepare({ run: r })
      assert.equal(first.reused, false)
      assert.equal(first.manifestKey, keys.stagePhaseManifest('imported-run', 'import', 0))
      assert.equal(first.checkpoint.prefix, 'runs/imported-run/base/checkpoint/')
      assert.equal(first.stats.maxPositions, 1024)
      const stored = await loadCheckpoint(store, first.checkpoint)
      assert.equal(stored.checkpoint.config.vocabSize, 320)
      assert.match(String(stored.checkpoint.tokenizerConfig?.chat_template), /<\|im_start\|>/)
      const policy = loadPolicy(engine, stored.checkpoint)
      assert.deepEqual(policy.codec.promptIds('hi').slice(0, 1), [1]) // <|im_start|>, as the template renders
      assert.equal(policy.codec.responseIds('<action>up</action>').at(-1), 2) // <|im_end|> ends the turn

      assert.equal((await acts.prepare({ run: r })).reused, true)
      await writeFile(join(folder, 'generation_config.json'), JSON.stringify({ eos_token_id: 2, bos_token_id: 1 }))
      const changed = await acts.prepare({ run: r })
      assert.equal(changed.reused, false)
      assert.equal(changed.manifestKey, keys.stagePhaseManifest('imported-run', 'import', 0, 1))
      // the recomputed attempt writes beside the first, which stays for audit
      assert.equal(changed.checkpoint.prefix, 'runs/imported-run/base/checkpoint.attempt-1/')
      assert.equal(
        (await store.head(keys.baseCheckpoint('imported-run', 'model.safetensors')))?.sha256,
        first.checkpoint.sha256,
      )
    } finally {
      await rm(folder, { recursive: true, force: true })
    }
  })

  it("prepare: an imported model with warm-start settings is behaviour-cloned from the folder's weights, reused until a file changes", async () => {
    const folder = await importedFixtureFolder()
    try {
      const ws = microConfig().warmstart
      assert.ok(ws)
      const plain = microImportedConfig('grpo', folder)
      const config = {
        ...plain,
        model: { ...plain.model, lora: { rank: 2, alpha: 4, dropout: 0, targets: ['q_proj' as const] } },
        warmstart: ws,
      }
      const { run: r } = await acts.planRun({ runId: 'imported-warm', config })
      const first = await acts.prepare({ run: r })
      assert.equal(first.manifestKey, keys.stagePhaseManifest('imported-warm', 'warmstart', 0))
      assert.equal(first.checkpoint.prefix, 'runs/imported-warm/base/checkpoint/')
      assert.equal(first.stats.steps, ws.steps)
      const stored = await loadCheckpoint(store, first.checkpoint)
      assert.equal(stored.checkpoint.config.vocabSize, 320)
      assert.match(String(stored.checkpoint.tokenizerConfig?.chat_template), /<\|im_start\|>/)
      assert.deepEqual(stored.checkpoint.lora?.config.targets, ['q_proj'])
      const manifest = await getJson(store, first.manifestKey)
      assert.ok(Object.keys((manifest as { inputs: Record<string, string> }).inputs).includes('folder/config.json'))
      assert.equal((await acts.prepare({ run: r })).reused, true)
      await writeFile(join(folder, 'generation_config.json'), JSON.stringify({ eos_token_id: 2, bos_token_id: 1 }))
      assert.equal((await acts.prepare({ run: r })).reused, false)
    } finally {
      await rm(folder, { recursive: true, force: true })
    }
  })

  it('prepare: a folder without a chat template fails at import, naming the files it looked in', async () => {
    const folder = await importedFixtureFolder()
    try {
      const tokenizer = trainByteLevelBpe(['hello world'], { vocabSize: 300, specialTokens: ['<|endoftext|>'] })
      await writeFile(join(folder, 'tokenizer.json'), JSON.stringify(tokenizer))
      await writeFile(join(folder, 'tokenizer_config.json'), JSON.stringify({ eos_token: '<|endoftext|>' }))
      const { run: r } = await acts.planRun({ runId: 'no-template', config: microImportedConfig('grpo', folder) })
      const f = await failure(acts.prepare({ run: r }))
      assert.equal(f.type, 'ModelImportError')
      assert.ok(
        f.message.includes(folder) && f.message.includes('no chat template (neither chat_template.jinja'),
        f.message,
      )
    } finally {
      await rm(folder, { recursive: true, force: true })
    }
  })

  it("prepare: a run context longer than the folder's max_position_embeddings is InvalidRunConfig", async () => {
    const folder = await importedFixtureFolder(512)
    try {
      const config = microImportedConfig('grpo', folder, 1024)
      const { run: r } = await acts.planRun({ runId: 'imported-long', config })
      const f = await failure(acts.prepare({ run: r }))
      assert.equal(f.type, 'InvalidRunConfig')
      assert.match(f.message, /model\.maxPositions: 1024 exceeds the max_position_embeddings 512/)
    } finally {
      await rm(folder, { recursive: true, force: true })
    }
  })

  it('annotate writes the library that Stage 1 writes before its SFT, for a row that skips Stage 1', async () => {
    const { run: library } = await acts.planRun({ runId: 'annotate-run', config: microConfig('skill-grpo') })
    const { run: seed } = await acts.planRun({ runId: 'stage1-run', config: microConfig('seed') })
    const libraryBase = await acts.prepare({ run: library })
    const seedBase = await acts.prepare({ run: seed })
    assert.equal(libraryBase.checkpoint.sha256, seedBase.checkpoint.sha256, 'the same warm-start')
    const annotated = await acts.annotate({ run: library, base: libraryBase.checkpoint })
    assert.equal(annotated.manifestKey, keys.stagePhaseManifest('annotate-run', 'annotate', 0))
    assert.deepEqual(Object.keys(annotated.outputs).sort(), ['annotations', 'trajectories'])
    const stage1 = await acts.stage1({ run: seed, base: seedBase.checkpoint })
    const read = async (runId: string) => (await store.get(keys.sftAnnotations(runId))).toString('utf8')
    assert.equal(await read('annotate-run'), await read('stage1-run'))
    assert.equal(annotated.stats.annotated, stage1.stats.annotated)
    assert.equal(annotated.stats.rolloutSuccess, stage1.stats.rolloutSuccess)
    assert.equal((await acts.annotate({ run: library, base: libraryBase.checkpoint })).reused, true)
    // the library now exists: the base evaluation of a library row reads it
    const evaluation = await acts.evaluate({
      run: library,
      target: { kind: 'base' },
      checkpoint: libraryBase.checkpoint,
    })
    assert.ok(evaluation.stats.success !== undefined)
  })
})
