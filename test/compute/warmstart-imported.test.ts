// The warm-start of an imported model: behaviour cloning from the folder's own weights, with its own tokenizer
// and chat template (no BPE is trained, no weight is initialized), on the same demonstrations as the built-in
// model's; with model.lora only the adapters train, and Stage 1 goes on training them.
import assert from 'node:assert/strict'
import { rm } from 'node:fs/promises'
import { after, before, describe, it } from 'node:test'
import { LORA_SEED, loadPolicy, type WarmstartInput, warmstart, withLora } from '../../compute/index.ts'
import { actingPools, demonstrations } from '../../compute/warmstart.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { mixSeed } from '../../envs/rng.ts'
import type { Checkpoint } from '../../policy/checkpoint.ts'
import { importHuggingFaceFolder } from '../../policy/hf-import.ts'
import { type RunConfig, runConfig } from '../../seed/config.ts'
import { importedFixtureFolder, microConfig, microImportedConfig } from './micro.ts'

const engine = createLocalEngine({ threads: 1 })

/** The micro imported run with the micro warm-start (no checks, no polish), `steps` steps at a high rate. */
function importedWarmstartConfig(folder: string, steps: number, lora?: RunConfig['model']['lora']): RunConfig {
  const base = microImportedConfig('seed', folder)
  const ws = microConfig().warmstart
  assert.ok(ws)
  return runConfig({
    ...base,
    model: { ...base.model, ...(lora ? { lora } : {}) },
    warmstart: { ...ws, steps, batchSize: 8, lr: 1e-2, warmupSteps: 0, evalEvery: 0, framePolishSteps: 0 },
    stage1: { ...base.stage1, actingData: 'demonstrations' },
  })
}

function input(config: RunConfig, checkpoint: Checkpoint): WarmstartInput {
  assert.ok(config.warmstart && config.model.kind === 'imported')
  return {
    env: config.env,
    model: { kind: 'imported', base: checkpoint, ...(config.model.lora ? { lora: config.model.lora } : {}) },
    prompt: config.prompt,
    warmstart: config.warmstart,
    analyzer: config.stage2.analyzer,
    evaluation: config.evaluation,
    seed: config.seed,
  }
}

describe('warmstart of an imported model', () => {
  let folder: string
  let imported: Checkpoint
  before(async () => {
    folder = await importedFixtureFolder()
    imported = (await importHuggingFaceFolder(folder)).checkpoint
  })
  after(async () => {
    await engine.close()
    await rm(folder, { recursive: true, force: true })
  })

  it('clones the demonstrations in its own chat template and tokenizer, lowering its loss on them', async () => {
    const config = importedWarmstartConfig(folder, 40)
    const r = await warmstart(engine, input(config, imported))
    // the folder's tokenizer, config and chat template, not a trained BPE
    assert.equal(r.stats.vocabSize, 320)
    assert.equal(r.checkpoint.tokenizerJson, imported.tokenizerJson)
    assert.deepEqual(r.checkpoint.config, imported.config)
    assert.deepEqual(r.checkpoint.tokenizerConfig, imported.tokenizerConfig)
    assert.equal(r.stats.trainedParameters, r.stats.parameters)
    assert.equal(r.checkpoint.lora, undefined)
    assert.ok(r.stats.lastLoss < 0.7 * r.stats.firstLoss, `loss ${r.stats.firstLoss} -> ${r.stats.lastLoss}`)
    // the same demonstrations as a built-in warm-start of these settings, tokenized by the template
    const policy = loadPolicy(engine, r.checkpoint)
    const demos = await demonstrations(config.env, config.warmstart!, config.prompt, config.seed)
    assert.equal(r.stats.plainPairs, demos.plain.length)
    const [plain] = (await actingPools(policy, demos, config.env, config.prompt, config.warmstart!, 1))('full')
    const example = plain!.examples[0]!
    assert.equal(example.context[0], 1) // <|im_start|>, as the Qwen2 template renders the user turn
    assert.equal(example.response.at(-1), 2) // <|im_end|> ends the demonstrated turn
    await policy.model.release()
  })

  it('with model.lora trains the adapters on the frozen weights, and Stage 1 keeps training the same ones', async () => {
    const lora = { rank: 4, alpha: 8, dropout: 0, targets: ['q_proj', 'v_proj'] as const }
    const config = importedWarmstartConfig(folder, 40, { ...lora, targets: [...lora.targets] })
    const r = await warmstart(engine, input(config, imported))
    const adapters = r.checkpoint.lora
    assert.ok(adapters)
    assert.equal(adapters.config.rank, 4)
    assert.ok(r.stats.trainedParameters > 0 && r.stats.trainedParameters < r.stats.parameters / 5)
    assert.equal(
      r.stats.trainedParameters,
      [...adapters.adapters.values()].reduce((n, a) => n + a.length, 0),
    )
    for (const [name, w] of imported.weights) assert.deepEqual(adapters.base.get(name), w, `${name} stays frozen`)
    assert.ok(r.stats.lastLoss < 0.8 * r.stats.firstLoss, `loss ${r.stats.firstLoss} -> ${r.stats.lastLoss}`)
    const policy = loadPolicy(engine, r.checkpoint)
    assert.equal(await withLora(policy, config.model.lora!, mixSeed(config.seed, LORA_SEED)), false)
    await policy.model.release()
  })
})
