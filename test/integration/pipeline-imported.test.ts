// The real-model path end to end: seedRun (row `seed`) on an imported Hugging Face folder, the engine's
// random-weight Qwen2 fixture, through the real dev server and the real S3 store: the import as the base
// checkpoint (no warm-start), Stage 1 and one Stage 2 iteration, with the model's own tokenizer and chat
// template in every phase. The fixture has 64 positions, too few for any sokoban prompt with its 320-token
// vocabulary, so the run imports a copy whose config.json allows 1024 (same weights; see micro.ts).
import assert from 'node:assert/strict'
import { rm } from 'node:fs/promises'
import { after, before, describe, it } from 'node:test'
import type { PhaseManifest } from '../../records/phase-manifest.ts'
import { ALGORITHMS } from '../../seed/algorithms.ts'
import { getJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import type { Manifest } from '../../store/manifest.ts'
import { importedFixtureFolder, microImportedConfig } from '../compute/micro.ts'
import {
  evaluationLabels,
  finishedPhases,
  iterationPhases,
  type PipelineHarness,
  startPipeline,
} from './pipeline-harness.ts'

const RUN_ID = `imported-${process.pid}`

describe('seedRun on an imported Qwen2 folder (real dev server, S3 store)', () => {
  let harness: PipelineHarness
  let folder: string

  before(async () => {
    folder = await importedFixtureFolder()
    harness = await startPipeline(`imported-${process.pid}`)
  })

  after(async () => {
    await harness?.close()
    if (folder) await rm(folder, { recursive: true, force: true })
  })

  it('runs import → Stage 1 → one iteration (snapshot, rollout, analyze, rescore, update) → evaluations', async () => {
    const { store } = harness
    const c = microImportedConfig('seed', folder)
    const result = await harness.run(RUN_ID, { ...c, evaluation: { ...c.evaluation, tasks: 2 } })
    assert.deepEqual(evaluationLabels(result), [
      ['base', -1],
      ['stage 1', -1],
      ['iteration 0', 0],
    ])
    assert.deepEqual(
      await finishedPhases(store, RUN_ID),
      [...iterationPhases(0, ALGORITHMS.seed, 2), 'evaluate/0000', 'evaluate/0001', 'import/0000', 'sft/0000'].sort(),
    )
    const imported = (await getJson(store, keys.stagePhaseManifest(RUN_ID, 'import', 0))) as PhaseManifest
    assert.deepEqual(Object.keys(imported.inputs).sort(), [
      'folder/config.json',
      'folder/generation_config.json',
      'folder/model.safetensors',
      'folder/tokenizer.json',
      'folder/tokenizer_config.json',
    ])
    // the chat template travels with every checkpoint: base, Stage 1 and the iteration's update
    for (const prefix of [
      keys.baseCheckpoint(RUN_ID, 'tokenizer_config.json'),
      keys.sftCheckpoint(RUN_ID, 'tokenizer_config.json'),
      keys.checkpoint(RUN_ID, 0, 'tokenizer_config.json'),
    ]) {
      assert.ok(await store.head(prefix), `${prefix} exists`)
    }
    const sft = (await getJson(store, keys.stagePhaseManifest(RUN_ID, 'sft', 0))) as PhaseManifest
    assert.ok((sft.stats.skillPairs ?? 0) > 0 && Number.isFinite(sft.stats.lastLoss), JSON.stringify(sft.stats))
    const update = (await getJson(store, keys.phaseManifest(RUN_ID, 0, 'update', 0))) as PhaseManifest
    assert.ok(Number.isFinite(update.stats.loss), JSON.stringify(update.stats))
    // the iteration manifest lists the updated checkpoint with its tokenizer_config.json
    const manifest = (await getJson(store, keys.iterationManifest(RUN_ID, 0))) as Manifest
    assert.ok(manifest.artifacts[keys.checkpoint(RUN_ID, 0, 'tokenizer_config.json')])
    assert.equal(
      result.checkpoint?.prefix,
      keys.checkpoint(RUN_ID, 0, 'model.safetensors').replace(/model\.safetensors$/, ''),
    )
  })
})
