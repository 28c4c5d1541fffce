// A real instruct model through the pipeline: SmolLM2-135M-Instruct (its GGUF converted by `seedflow import`'s
// importer into a folder) as `model.kind: "imported"`, a smoke seedRun (row `seed`: import → Stage 1 → one
// iteration → evaluations) on the real dev server and S3 store, with SmolLM2 itself writing the analyze
// phase's hindsight skills. Sizes are tiny: the run shows the pieces fit, not that the model learns.
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { importGguf, writeCheckpointFolder } from '../../policy/gguf/gguf-import.ts'
import type { PhaseManifest } from '../../records/phase-manifest.ts'
import { runConfig } from '../../seed/config.ts'
import { getJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import { microImportedConfig } from '../compute/micro.ts'
import { evaluationLabels, type PipelineHarness, startPipeline } from './pipeline-harness.ts'
import { TEST_ENV } from './servers.ts'

const RUN_ID = `smollm2-${process.pid}`

describe('seedRun on SmolLM2-135M-Instruct imported from its GGUF (real dev server, S3 store)', () => {
  let harness: PipelineHarness
  let dir: string

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'seedflow-smollm2-'))
    const imported = await importGguf(process.env[TEST_ENV.model] as string)
    await writeCheckpointFolder(join(dir, 'model'), imported.checkpoint)
    harness = await startPipeline(RUN_ID)
  })

  after(async () => {
    await harness?.close()
    if (dir) await rm(dir, { recursive: true, force: true })
  })

  it('runs import → Stage 1 → one iteration → evaluations, the analyzer being SmolLM2', async () => {
    const { store } = harness
    const micro = microImportedConfig('seed', join(dir, 'model'), 1024)
    const config = runConfig({
      ...micro,
      threads: 2,
      stage1: { ...micro.stage1, tasks: 1, samplesPerTask: 2, maxEnvSteps: 2, steps: 1, batchSize: 2 },
      stage2: {
        ...micro.stage2,
        tasksPerStep: 1,
        groupSize: 2,
        maxEnvSteps: 2,
        miniBatchSize: 2,
        analyzer: { maxPromptTokens: 800, maxAnswerTokens: 24 },
      },
      evaluation: { ...micro.evaluation, tasks: 2, maxEnvSteps: 2 },
    })
    const started = Date.now()
    const result = await harness.run(RUN_ID, config)
    assert.deepEqual(evaluationLabels(result), [
      ['base', -1],
      ['stage 1', -1],
      ['iteration 0', 0],
    ])
    const imported = (await getJson(store, keys.stagePhaseManifest(RUN_ID, 'import', 0))) as PhaseManifest
    assert.equal(imported.stats.vocabSize, 49152)
    // the analyze phase: SmolLM2 read each finished trajectory and wrote an answer (parsed or not)
    const analyze = (await getJson(store, keys.phaseManifest(RUN_ID, 0, 'analyze', 0))) as PhaseManifest
    assert.ok((analyze.stats.newTokens ?? 0) > 0, JSON.stringify(analyze.stats))
    const skills = Buffer.from((await store.get(keys.skills(RUN_ID, 0, 0))) as Uint8Array)
      .toString('utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { raw: string; prompt: string })
    assert.equal(skills.length, 2)
    for (const s of skills) {
      assert.ok(s.raw.length > 0, 'the analyzer answered')
      assert.match(s.prompt, /^Analyze the agent episode below/) // rendered through SmolLM2's chat template
    }
    const update = (await getJson(store, keys.phaseManifest(RUN_ID, 0, 'update', 0))) as PhaseManifest
    assert.ok(Number.isFinite(update.stats.loss), JSON.stringify(update.stats))
    console.log(
      `smollm2 smoke run: ${((Date.now() - started) / 1000).toFixed(0)} s; analyze ${JSON.stringify(analyze.stats)}`,
    )
  })
})
