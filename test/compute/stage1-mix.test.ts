// stage2.stage1Mix (issue 20 item 3): Stage-1 examples mixed into the Stage 2 update keep the analyzer and the
// skill-reading trained.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { SkillRecord } from '../../compute/analyze.ts'
import { annotateWithOracle, type Policy, rollout } from '../../compute/index.ts'
import { stage1Mix } from '../../compute/stage1-mix.ts'
import { createLocalEngine } from '../../engine/index.ts'
import type { Checkpoint } from '../../policy/checkpoint.ts'
import { parseRunConfig } from '../../seed/config.ts'
import { paperPreset } from '../../seed/presets/paper.ts'
import { microCheckpoint, microConfig, microPolicy, microRolloutInput, QWEN2_FIXTURE } from './micro.ts'

const engine = createLocalEngine({ threads: 1 })
after(() => engine.close())
const config = microConfig()
let checkpoint: Checkpoint
let annotations: SkillRecord[]

before(async () => {
  checkpoint = await microCheckpoint(engine, config)
  const policy = microPolicy(engine, checkpoint)
  const rolled = await rollout(policy, microRolloutInput(config, 5))
  const annotated = await annotateWithOracle(config.env, policy.codec, config.model.maxPositions, {
    trajectories: rolled.trajectories,
    prompt: config.prompt,
    maxPromptTokens: config.stage2.analyzer.maxPromptTokens,
    maxAnswerTokens: config.stage2.analyzer.maxAnswerTokens,
    batchSize: 4,
  })
  annotations = annotated.skills.filter((s) => s.ok)
})

const mixInput = (analyzerShare: number, steps = 12) => ({
  env: config.env,
  prompt: config.prompt,
  settings: { steps, batchSize: 4, lr: 3e-3, analyzerShare },
  annotations,
  warmstart: config.warmstart,
  seed: 3,
})

describe('stage2.stage1Mix', () => {
  it('trains on analyzer answers and skill-reading demonstrations: the loss falls, the weights move', async () => {
    const policy: Policy = microPolicy(engine, checkpoint)
    const before = (await policy.trainer.trained()).get('model.embed_tokens.weight')!
    const stats = await stage1Mix(policy, mixInput(0.5, 24))
    assert.equal(stats.steps, 24)
    assert.equal(stats.analyzerPairs, annotations.length)
    assert.ok(stats.skillDemos > 0, `${stats.skillDemos} skill-reading demonstrations`)
    assert.ok(stats.lastLoss < stats.firstLoss, `loss ${stats.firstLoss} → ${stats.lastLoss}`)
    assert.notDeepEqual((await policy.trainer.trained()).get('model.embed_tokens.weight'), before)
  })

  it('analyzerShare 1 needs no warm-start settings and makes no demonstrations', async () => {
    const stats = await stage1Mix(microPolicy(engine, checkpoint), { ...mixInput(1, 2), warmstart: null })
    assert.equal(stats.skillDemos, 0)
    await assert.rejects(
      stage1Mix(microPolicy(engine, checkpoint), { ...mixInput(0.5, 2), warmstart: null }),
      /warm-start/,
    )
    await assert.rejects(
      stage1Mix(microPolicy(engine, checkpoint), { ...mixInput(1, 2), annotations: [] }),
      /no parsed skill/,
    )
  })

  it('is deterministic for a seed', async () => {
    const a = microPolicy(engine, checkpoint)
    const b = microPolicy(engine, checkpoint)
    const sa = await stage1Mix(a, mixInput(0.5, 3))
    const sb = await stage1Mix(b, mixInput(0.5, 3))
    assert.equal(sa.lastLoss, sb.lastLoss)
    assert.deepEqual(
      (await a.trainer.trained()).get('model.embed_tokens.weight'),
      (await b.trainer.trained()).get('model.embed_tokens.weight'),
    )
  })

  it('the schema: off by default, refused for a row without Stage 1, demonstrations need a warm-start', () => {
    assert.equal(config.stage2.stage1Mix, null)
    const mix = { steps: 4, batchSize: 8, lr: 1e-4, analyzerShare: 0.5 }
    assert.ok(parseRunConfig({ ...config, stage2: { ...config.stage2, stage1Mix: mix } }).ok)
    const grpo = parseRunConfig({ ...config, algorithm: 'grpo', stage2: { ...config.stage2, stage1Mix: mix } })
    assert.ok(
      !grpo.ok && grpo.problems.some((p) => /^stage2\.stage1Mix: .*algorithm grpo.*starts from the base/.test(p)),
    )
    const imported = paperPreset('sokoban', QWEN2_FIXTURE)
    const noWarmstart = parseRunConfig({ ...imported, stage2: { ...imported.stage2, stage1Mix: mix } })
    assert.ok(
      !noWarmstart.ok && noWarmstart.problems.some((p) => p.startsWith('stage2.stage1Mix.analyzerShare: ')),
      JSON.stringify(noWarmstart),
    )
    const analyzerOnly = { ...mix, analyzerShare: 1 }
    assert.ok(parseRunConfig({ ...imported, stage2: { ...imported.stage2, stage1Mix: analyzerOnly } }).ok)
  })
})
