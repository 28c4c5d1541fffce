// A diverging update fails in the mini-batch where its loss or gradient stops being finite, naming the term.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import {
  type Policy,
  rescore,
  rollout,
  type ScoredSample,
  sampleTasks,
  update,
} from '../../../activities/core/index.ts'
import { createLocalEngine } from '../../../engine/index.ts'
import type { Checkpoint } from '../../../policy/checkpoint.ts'
import { NonFiniteLossError } from '../../../policy/train-step.ts'
import { episodeSkillBlock } from '../../../seed/index.ts'
import { microCheckpoint, microConfig, microPolicy } from './micro.ts'

const engine = createLocalEngine({ threads: 1 })
after(() => engine.close())
const config = microConfig()
const terms = { kl: true, entropy: true, opd: true }
let checkpoint: Checkpoint
let samples: ScoredSample[]

before(async () => {
  checkpoint = await microCheckpoint(engine, config)
  const policy: Policy = microPolicy(engine, checkpoint)
  const rolled = await rollout(policy, {
    env: config.env,
    tasks: sampleTasks(config.env, 'train', 2, 11),
    groupSize: 2,
    maxEnvSteps: 3,
    temperature: 1,
    prompt: config.prompt,
    seed: 5,
  })
  const scored = await rescore(policy, null, {
    trajectories: rolled.trajectories,
    teacherBlocks: rolled.trajectories.map(() => episodeSkillBlock('Push the box toward the target.')),
    budget: {
      maxPromptTokens: config.prompt.maxPromptTokens,
      responseTokens: config.prompt.maxResponseTokens,
      contextLength: config.model.maxPositions,
    },
    temperature: 1,
    batchSize: 8,
  })
  samples = scored.samples
})

describe('update with a diverging learning rate', () => {
  it('fails in the second mini-batch, naming the loss term, the mini-batch and the learning rate', async () => {
    assert.ok(samples.length > 8, `${samples.length} samples: at least three mini-batches of 4`)
    const policy = microPolicy(engine, checkpoint)
    const settings = { ...config.stage2, lr: 1e12, miniBatchSize: 4 }
    await assert.rejects(update(policy, { samples, terms, settings }), (e: unknown) => {
      assert.ok(e instanceof NonFiniteLossError, String(e))
      assert.match(e.message, /^the (pg|kl|entropy|opd|total) loss term is (NaN|-?Infinity) in mini-batch 2 of \d+ /)
      assert.match(e.message, /lr 1000000000000\b/)
      assert.ok(!Number.isFinite(e.values.loss ?? 0))
      return true
    })
  })

  it('trains through with the same samples at a sane learning rate', async () => {
    const policy = microPolicy(engine, checkpoint)
    const u = await update(policy, { samples, terms, settings: { ...config.stage2, lr: 1e-4, miniBatchSize: 4 } })
    assert.ok(Number.isFinite(u.metrics.loss) && Number.isFinite(u.metrics.gradNorm))
  })
})
