import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import {
  actorFeeds,
  actorLossBuilder,
  analyze,
  annotateWithOracle,
  evaluate,
  fitPrompt,
  loadPolicy,
  type Policy,
  padToMiniBatch,
  type RolloutResult,
  rescore,
  rollout,
  sampleAdvantages,
  sampleTasks,
  sft,
  update,
} from '../../compute/index.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { getEnv } from '../../envs/index.ts'
import type { Checkpoint } from '../../policy/checkpoint.ts'
import { IO } from '../../policy/model.ts'
import { NonFiniteLossError } from '../../policy/trainer.ts'
import { decodeRescore, encodeRescore } from '../../records/rescore-format.ts'
import { ENGINE_DEFAULTS } from '../../seed/config.ts'
import { EPISODE_SKILL_TITLE, episodeSkillBlock, insertBlock } from '../../seed/index.ts'
import { microCheckpoint, microConfig, microPolicy, microRolloutInput } from './micro.ts'

const engine = createLocalEngine({ threads: 1 })
after(() => engine.close())
const config = microConfig()
let checkpoint: Checkpoint
let policy: Policy
let rolled: RolloutResult

const rolloutInput = (seed: number) => microRolloutInput(config, seed)
const budget = () => ({
  maxPromptTokens: config.prompt.maxPromptTokens,
  responseTokens: config.prompt.maxResponseTokens,
  contextLength: config.model.maxPositions,
})
const SKILL = 'Push the box X toward the target O; never push it into a corner.'

/** The shared rollout rescored by the shared policy, with `teacherBlocks` per trajectory. */
const rescored = (teacherBlocks: (string | null)[]) =>
  rescore(policy, null, {
    trajectories: rolled.trajectories,
    teacherBlocks,
    budget: budget(),
    temperature: 1,
    batchSize: 8,
  })

before(async () => {
  checkpoint = await microCheckpoint(engine, config)
  policy = microPolicy(engine, checkpoint)
  rolled = await rollout(policy, rolloutInput(5))
})

describe('rollout', () => {
  it('plays B × N episodes, the group sharing its task, one step sample per env step', () => {
    assert.equal(rolled.trajectories.length, 4)
    const tasks = sampleTasks(config.env, 'train', 2, 11)
    for (const t of rolled.trajectories) {
      assert.deepEqual(t.task, tasks[t.group])
      assert.equal(t.steps.length, t.trajectory.steps.length)
      // each step records the expert's action in the state it was taken from (replayed independently)
      const replay = getEnv(config.env as string).reset(t.task)
      for (const s of t.steps) {
        assert.equal(s.expertAction, replay.expertAction())
        replay.step(s.responseText)
      }
      assert.ok(t.steps.length >= 1 && t.steps.length <= 3)
      for (const s of t.steps) {
        assert.deepEqual(s.promptIds, policy.codec.promptIds(s.actingPrompt))
        assert.equal(s.responseIds.length, s.samplerLogprobs.length)
        assert.ok(s.responseIds.length >= 1 && s.responseIds.length <= config.prompt.maxResponseTokens)
        assert.equal(s.valid, s.action !== null)
      }
    }
    assert.deepEqual(
      rolled.trajectories.map((t) => [t.group, t.sample]),
      [
        [0, 0],
        [0, 1],
        [1, 0],
        [1, 1],
      ],
    )
    assert.equal(
      rolled.stats.stepSamples,
      rolled.trajectories.reduce((n, t) => n + t.steps.length, 0),
    )
  })

  it('gives the same rollouts for the same seed and different ones for another', async () => {
    const again = await rollout(policy, rolloutInput(5))
    const ids = (r: RolloutResult) => r.trajectories.map((t) => t.steps.map((s) => s.responseIds))
    assert.deepEqual(ids(again), ids(rolled))
    const other = await rollout(policy, rolloutInput(6))
    assert.notDeepEqual(ids(other), ids(rolled))
  })
})

describe('rescore', () => {
  it('reproduces the sampler log-probs as old log-probs; the reference defaults to the policy', async () => {
    const r = await rescore(policy, null, {
      trajectories: rolled.trajectories,
      budget: budget(),
      temperature: 1,
      batchSize: 3,
    })
    assert.equal(r.samples.length, rolled.stats.stepSamples)
    assert.ok(r.stats.maxSamplerGap < 1e-4, `sampler vs score gap ${r.stats.maxSamplerGap}`)
    for (const s of r.samples) {
      assert.equal(s.old.length, s.responseIds.length)
      assert.deepEqual(s.ref, s.old)
      assert.equal(s.teacher, null)
    }
  })

  it('scores the teacher only for trajectories with a block, on the same response tokens', async () => {
    const blocks = rolled.trajectories.map((t) => (t.id % 2 === 0 ? episodeSkillBlock(SKILL) : null))
    const progress: Array<[number, number]> = []
    const r = await rescore(policy, null, {
      trajectories: rolled.trajectories,
      teacherBlocks: blocks,
      budget: budget(),
      temperature: 1,
      batchSize: 4,
      onProgress: (scored, items) => progress.push([scored, items]),
    })
    // progress after every score run: old log-probs of every sample, then the teacher's (the reference is the policy)
    const items = r.samples.length + r.stats.teacherSamples
    assert.deepEqual(progress.at(-1), [items, items])
    assert.ok(
      progress.length >= Math.ceil(items / 4) &&
        progress.every(([n, of], i) => of === items && n > (progress[i - 1]?.[0] ?? 0)),
    )
    for (const s of r.samples) {
      if (s.trajectory % 2 === 0) {
        assert.ok(s.teacher && s.teacher.length === s.responseIds.length)
        assert.ok(s.teacherPromptIds && s.teacherPromptIds.length > s.promptIds.length)
        assert.notDeepEqual(s.teacher, s.old)
      } else assert.equal(s.teacher, null)
    }
    assert.equal(r.stats.teacherSamples, r.samples.filter((s) => s.trajectory % 2 === 0).length)
    // teacher gaps: whole-response log π_teacher − log π_old, averaged apart for the expert's actions
    const steps = rolled.trajectories.flatMap((t) => t.steps)
    const taught = r.samples.filter((s) => s.teacher)
    for (const s of r.samples) {
      const step = steps[r.samples.indexOf(s)]!
      assert.equal(s.expert, s.valid && step.action === step.expertAction)
    }
    const gap = (s: (typeof taught)[number]) => s.teacher!.reduce((a, t, k) => a + t - s.old[k]!, 0)
    const mean = (xs: number[]) => (xs.length > 0 ? xs.reduce((a, b) => a + b, 0) / xs.length : null)
    const expert = taught.filter((s) => s.expert).map(gap)
    const other = taught.filter((s) => !s.expert).map(gap)
    assert.equal(r.stats.teacherGap.expertSamples, expert.length)
    assert.equal(r.stats.teacherGap.otherSamples, other.length)
    assert.equal(expert.length + other.length, taught.length)
    const close = (a: number | null, b: number | null) => (a === null ? b === null : Math.abs(a - (b ?? NaN)) < 1e-9)
    assert.ok(close(r.stats.teacherGap.expert, mean(expert)), `${r.stats.teacherGap.expert} vs ${mean(expert)}`)
    assert.ok(close(r.stats.teacherGap.other, mean(other)))
  })

  it('truncation drops history, never the task line, the skill block or the response', async () => {
    const withHistory = await rollout(policy, { ...rolloutInput(5), prompt: { ...config.prompt, historyWindow: 1 } })
    const t = withHistory.trajectories.find((x) => x.steps.length >= 2)
    assert.ok(t, 'a trajectory with history')
    const step = t.steps[1]!
    assert.match(step.promptText, /\[Observation 1:/)
    const block = episodeSkillBlock(SKILL)
    const full = fitPrompt(policy.codec, step.promptText, budget(), block)
    const tight = { ...budget(), maxPromptTokens: full.tokens - 1 }
    const fit = fitPrompt(policy.codec, step.promptText, tight, block)
    assert.ok(fit.dropped >= 1 && !fit.blockDropped)
    assert.doesNotMatch(fit.prompt, /\[Observation 1:/)
    assert.match(fit.prompt, /Your goal is to push the box/)
    assert.ok(fit.prompt.includes(block))
    const blocks: (string | null)[] = []
    blocks[t.id] = block
    const r = await rescore(policy, null, {
      trajectories: [t],
      teacherBlocks: blocks,
      budget: tight,
      temperature: 1,
      batchSize: 4,
    })
    const sample = r.samples[1]!
    assert.deepEqual(sample.responseIds, step.responseIds)
    assert.ok(r.stats.teacherTruncation.truncated >= 1)
    assert.equal(r.stats.teacherTruncation.blockDropped, 0)
    assert.ok(policy.codec.decode(sample.teacherPromptIds!).includes(EPISODE_SKILL_TITLE))
  })

  it("prompt.truncation 'left': acting and teacher prompts keep the last ids of their full rendering, counted", async () => {
    const shortest = Math.min(...rolled.trajectories.flatMap((t) => t.steps.map((s) => s.promptIds.length)))
    const limit = shortest - 3 // every acting prompt is over it
    const prompt = { ...config.prompt, maxPromptTokens: limit, truncation: 'left' as const }
    const cut = await rollout(policy, { ...rolloutInput(5), prompt })
    const steps = cut.trajectories.flatMap((t) => t.steps)
    assert.equal(cut.stats.truncation.prompts, steps.length)
    assert.equal(cut.stats.truncation.truncated, steps.length)
    assert.equal(cut.stats.truncation.blockDropped, 0)
    for (const s of steps) {
      const full = policy.codec.promptIds(s.actingPrompt)
      assert.equal(s.promptIds.length, limit)
      assert.equal(s.promptTokensCut, full.length - limit)
      assert.deepEqual(s.promptIds, full.slice(full.length - limit))
    }
    const block = episodeSkillBlock(SKILL)
    const r = await rescore(policy, null, {
      trajectories: cut.trajectories,
      teacherBlocks: cut.trajectories.map(() => block),
      budget: { ...budget(), maxPromptTokens: limit, truncation: 'left' },
      temperature: 1,
      batchSize: 8,
    })
    assert.equal(r.stats.teacherSamples, steps.length)
    assert.equal(r.stats.teacherTruncation.truncated, steps.length)
    assert.equal(r.stats.teacherTruncation.blockDropped, 0)
    r.samples.forEach((sample, i) => {
      const full = policy.codec.promptIds(insertBlock(steps[i]!.promptText, block))
      assert.deepEqual(sample.teacherPromptIds, full.slice(full.length - limit))
      assert.deepEqual(sample.promptIds, steps[i]!.promptIds)
    })
  })
})

describe('update', () => {
  const settings = { ...config.stage2, miniBatchSize: 4 }
  const terms = { kl: true, entropy: true, opd: true }

  it('starts at ratio 1 (clip fraction 0, approx KL 0) from the rescore artifact and changes the weights', async () => {
    const fresh = microPolicy(engine, checkpoint)
    const r = await rescore(fresh, null, {
      trajectories: rolled.trajectories,
      teacherBlocks: rolled.trajectories.map(() => episodeSkillBlock(SKILL)),
      budget: budget(),
      temperature: 1,
      batchSize: 8,
    })
    const before = (await fresh.trainer.trained()).get('model.embed_tokens.weight')!
    // through the artifact the update reads in the pipeline: its old log-probs must be the ones rescore computed
    const samples = decodeRescore(encodeRescore(r.samples), 'rescore.bin')
    const steps: number[][] = []
    const u = await update(fresh, {
      samples,
      terms,
      settings,
      onProgress: (step, of, loss) => steps.push([step, of, loss]),
    })
    assert.ok(u.perMiniBatch.length >= 2)
    assert.deepEqual(
      steps,
      u.perMiniBatch.map((m, i) => [i + 1, u.perMiniBatch.length, m.loss]),
    )
    assert.equal(u.metrics.firstClipFraction, 0)
    assert.ok(Math.abs(u.metrics.firstApproxKl ?? Number.NaN) < 1e-5, `first approx KL ${u.metrics.firstApproxKl}`)
    assert.ok(Math.abs(u.perMiniBatch[0]!.kl!) < 1e-5, `first KL to the reference ${u.perMiniBatch[0]!.kl}`)
    assert.ok(u.metrics.opdGateMean! > 0 && u.metrics.opdGateMean! < 1)
    assert.notDeepEqual((await fresh.trainer.trained()).get('model.embed_tokens.weight'), before)
    assert.equal(u.optimizerState.step, u.perMiniBatch.length)
  })

  it('steps a mini-batch in micro-batches as it does whole: loss, terms, diagnostics and gradient norm', async () => {
    // teachers on every other trajectory: micro-batches of 3 step samples hold uneven shares of distilled tokens
    const r = await rescored(rolled.trajectories.map((t) => (t.id % 2 === 0 ? episodeSkillBlock(SKILL) : null)))
    assert.ok(r.samples.length > 6, `${r.samples.length} step samples`)
    const whole = microPolicy(engine, checkpoint)
    const parts = loadPolicy(engine, checkpoint, { settings: { ...ENGINE_DEFAULTS, microBatchSize: 3 } })
    const one = { ...settings, miniBatchSize: r.samples.length }
    const a = (await update(whole, { samples: r.samples, terms, settings: one })).perMiniBatch[0]!
    const b = (await update(parts, { samples: r.samples, terms, settings: one })).perMiniBatch[0]!
    assert.ok(a.opdTokens > 0 && a.opdTokens < r.samples.reduce((n, s) => n + s.responseIds.length, 0))
    for (const key of ['loss', 'gradNorm', 'pgLoss', 'clipFraction', 'approxKl', 'kl', 'entropy', 'opdLoss'] as const) {
      const [x, y] = [a[key] as number, b[key] as number]
      assert.ok(Math.abs(x - y) <= 1e-5 * Math.max(1, Math.abs(x)), `${key}: ${y} in micro-batches, ${x} whole`)
    }
    for (const key of ['opdGateMean', 'opdPositiveGapShare', 'opdGapMean'] as const) {
      const [x, y] = [a[key] as number, b[key] as number]
      assert.ok(Math.abs(x - y) <= 1e-5 * Math.max(1, Math.abs(x)), `${key}: ${y} in micro-batches, ${x} whole`)
    }
    await whole.trainer.release()
    await parts.trainer.release()
  })

  it('reports the OPD gate mean and positive-gap share over every distilled token', async () => {
    const r = await rescored(rolled.trajectories.map((t) => (t.id % 2 === 0 ? episodeSkillBlock(SKILL) : null)))
    // lr 0 keeps the student at π_old in every mini-batch, so s = old and the gate is σ(β·(teacher − old))
    const frozen = microPolicy(engine, checkpoint)
    const u = await update(frozen, { samples: r.samples, terms, settings: { ...settings, lr: 0, miniBatchSize: 3 } })
    const gaps = r.samples.flatMap((s) => (s.teacher ? Array.from(s.teacher, (t, k) => t - s.old[k]!) : []))
    assert.ok(
      u.perMiniBatch.some((m) => m.opdTokens !== u.perMiniBatch[0]!.opdTokens),
      'uneven mini-batches',
    )
    assert.equal(u.metrics.opdTokens, gaps.length)
    const gate = gaps.reduce((a, g) => a + 1 / (1 + Math.exp(-settings.opdBeta * g)), 0) / gaps.length
    const positive = gaps.filter((g) => g > 0).length / gaps.length
    const gapMean = gaps.reduce((a, g) => a + g, 0) / gaps.length
    assert.ok(Math.abs(u.metrics.opdGateMean! - gate) < 1e-5, `gate mean ${u.metrics.opdGateMean} vs ${gate}`)
    assert.ok(Math.abs(u.metrics.opdPositiveGapShare! - positive) < 1e-6, `${u.metrics.opdPositiveGapShare}`)
    assert.ok(Math.abs(u.metrics.opdGapMean! - gapMean) < 1e-4, `gap mean ${u.metrics.opdGapMean} vs ${gapMean}`)
  })

  it('masked trajectories contribute nothing to the OPD gradient; unmasked ones do', async () => {
    const r = await rescored(rolled.trajectories.map((t) => (t.id === 0 ? episodeSkillBlock(SKILL) : null)))
    const train = await policy.model.gradientModel(actorLossBuilder(terms, settings))
    const advantages = new Float64Array(r.samples.length).fill(0.5)
    const base = actorFeeds(policy, r.samples, advantages, terms, 1)
    const T = base.teacher_logp!.dims[1]!
    const grad = 'model.layers.0.mlp.down_proj.weight_grad'
    const run = async (edit: (teacher: Float32Array, b: number) => void) => {
      const teacher = Float32Array.from(base.teacher_logp!.data as Float32Array)
      r.samples.forEach((_, b) => {
        edit(teacher, b)
      })
      const out = await engine.run(
        train,
        { ...base, teacher_logp: { ...base.teacher_logp!, data: teacher } },
        { kept: await policy.model.parameters.kept() },
      )
      return { loss: Number(out[IO.loss]!.data[0]), grad: Float32Array.from(out[grad]!.data as Float32Array) }
    }
    const reference = await run(() => {})
    const shiftMasked = await run((teacher, b) => {
      if (r.samples[b]!.teacher) return
      for (let t = 0; t < T; t++) teacher[b * T + t] = -7
    })
    assert.equal(shiftMasked.loss, reference.loss)
    assert.deepEqual(shiftMasked.grad, reference.grad)
    const shiftAnalyzed = await run((teacher, b) => {
      if (!r.samples[b]!.teacher) return
      for (let t = 0; t < T; t++) teacher[b * T + t] = 0
    })
    assert.notDeepEqual(shiftAnalyzed.grad, reference.grad)
  })

  it('keeps tied groups: all-equal rewards give advantage 0, and OPD, KL and entropy still train on them', async () => {
    const r = await rescored(rolled.trajectories.map(() => episodeSkillBlock(SKILL)))
    // every group all-fail: the same episode reward and every action valid
    const tied = r.samples.map((s) => ({ ...s, episodeReward: -1, valid: true }))
    const fresh = microPolicy(engine, checkpoint)
    const before = (await fresh.trainer.trained()).get('model.embed_tokens.weight')!
    const u = await update(fresh, { samples: tied, terms, settings })
    assert.ok(
      u.advantages.every((a) => a === 0),
      'advantage 0 everywhere',
    )
    assert.equal(u.metrics.samples, tied.length, 'no sample dropped')
    assert.ok((u.metrics.opdTokens ?? 0) > 0 && u.metrics.opdLoss !== null && u.metrics.opdLoss !== 0)
    assert.ok(u.metrics.entropy !== null && u.metrics.kl !== null)
    assert.notDeepEqual(
      (await fresh.trainer.trained()).get('model.embed_tokens.weight'),
      before,
      'the weights still move',
    )
  })

  it("padToMiniBatch (the reference's padding) copies seeded random samples up to a multiple, before advantages", async () => {
    const r = await rescored(rolled.trajectories.map(() => episodeSkillBlock(SKILL)))
    const n = r.samples.length
    const miniBatchSize = 5
    assert.ok(n % miniBatchSize !== 0, `${n} samples: not a multiple of ${miniBatchSize} already`)
    const padded = padToMiniBatch(r.samples, miniBatchSize, 7)
    assert.equal(padded.length % miniBatchSize, 0)
    assert.ok(padded.length - n < miniBatchSize)
    assert.deepEqual(padded.slice(0, n), r.samples)
    for (const copy of padded.slice(n)) assert.ok(r.samples.includes(copy), 'a copy is one of the samples')
    assert.deepEqual(padToMiniBatch(r.samples, miniBatchSize, 7), padded, 'seeded')
    assert.notDeepEqual(
      [8, 9, 10].map((seed) => padToMiniBatch(r.samples, miniBatchSize, seed).slice(n)),
      [7, 7, 7].map(() => padded.slice(n)),
      'another seed copies other samples',
    )
    assert.equal(padToMiniBatch(padded, miniBatchSize, 7), padded, 'a multiple is left alone')
    const lr0 = { ...settings, lr: 0, miniBatchSize }
    const plain = await update(microPolicy(engine, checkpoint), { samples: r.samples, terms, settings: lr0 })
    assert.equal(plain.metrics.samples, n)
    assert.equal(plain.metrics.paddedSamples, 0)
    assert.equal(
      plain.perMiniBatch.at(-1)!.samples,
      n % miniBatchSize,
      'without padding the last mini-batch is smaller',
    )
    const on = { ...lr0, padToMiniBatch: true }
    await assert.rejects(update(microPolicy(engine, checkpoint), { samples: r.samples, terms, settings: on }), /seed/)
    const pad = await update(microPolicy(engine, checkpoint), { samples: r.samples, terms, settings: on, seed: 7 })
    assert.equal(pad.metrics.samples, padded.length)
    assert.equal(pad.metrics.paddedSamples, padded.length - n)
    assert.ok(pad.perMiniBatch.every((m) => m.samples === miniBatchSize))
    // the copies enter the group statistics: the advantages are those of the padded list
    assert.deepEqual(pad.advantages, sampleAdvantages(padded, on))
    assert.notDeepEqual(pad.advantages.subarray(0, n), plain.advantages)
  })

  it('stops between mini-batches when its progress callback throws (how a cancelled update activity ends)', async () => {
    const r = await rescored(rolled.trajectories.map(() => episodeSkillBlock(SKILL)))
    const stopped = microPolicy(engine, checkpoint)
    let taken = 0
    const cancelled = new Error('cancelled')
    const onProgress = () => {
      taken++
      throw cancelled
    }
    await assert.rejects(update(stopped, { samples: r.samples, terms, settings, onProgress }), (e) => e === cancelled)
    assert.equal(taken, 1)
  })

  it('fails a diverging learning rate in the second mini-batch, naming the loss term, mini-batch and lr', async () => {
    const r = await rescored(rolled.trajectories.map(() => episodeSkillBlock(SKILL)))
    assert.ok(r.samples.length > 8, `${r.samples.length} samples: at least three mini-batches of 4`)
    const diverging = microPolicy(engine, checkpoint)
    await assert.rejects(
      update(diverging, { samples: r.samples, terms, settings: { ...settings, lr: 1e12 } }),
      (e: unknown) => {
        assert.ok(e instanceof NonFiniteLossError, String(e))
        assert.match(e.message, /^the (pg|kl|entropy|opd|total) loss term is (NaN|-?Infinity) in mini-batch 2 of \d+ /)
        assert.match(e.message, /lr 1000000000000\b/)
        assert.ok(!Number.isFinite(e.values.loss ?? 0))
        return true
      },
    )
  })
})

describe('analyze', () => {
  it('counts the untrained analyzer’s parse failures as data', async () => {
    const r = await analyze(policy, {
      trajectories: rolled.trajectories,
      prompt: config.prompt,
      maxPromptTokens: 400,
      maxAnswerTokens: 12,
      batchSize: 3,
    })
    assert.equal(r.skills.length, rolled.trajectories.length)
    assert.equal(r.stats.parse.total, rolled.trajectories.length)
    assert.equal(r.stats.parse.parsed + r.stats.parse.failed, r.stats.parse.total)
    assert.ok(r.stats.parse.failed > 0)
    for (const s of r.skills.filter((x) => !x.ok)) {
      assert.equal(s.skill, null)
      assert.ok(s.failure && s.failure.reason.length > 0)
      assert.equal(s.promptHash.length, 64)
    }
  })

  it('oracle annotation parses every answer and fits the analyzer budget', async () => {
    const r = await annotateWithOracle(config.env, policy.codec, config.model.maxPositions, {
      trajectories: rolled.trajectories,
      prompt: config.prompt,
      maxPromptTokens: 370,
      maxAnswerTokens: 120,
      batchSize: 4,
    })
    assert.equal(r.stats.parse.parseRate, 1)
    for (const s of r.skills) {
      assert.ok(policy.codec.countPromptTokens(s.prompt) <= 370)
      assert.match(s.prompt, /Task description: push the box/)
      assert.ok(s.skill && s.skill.length > 10)
    }
    assert.ok(r.stats.truncated > 0, 'a 370-token budget leaves out steps')
  })
})

describe('sft and evaluate', () => {
  it('Stage 1 SFT lowers the loss on the analyzer pairs', async () => {
    const fresh = microPolicy(engine, checkpoint)
    const { skills } = await annotateWithOracle(config.env, fresh.codec, config.model.maxPositions, {
      trajectories: rolled.trajectories,
      prompt: config.prompt,
      maxPromptTokens: 400,
      maxAnswerTokens: 120,
      batchSize: 4,
    })
    const s = await sft(fresh, {
      skills,
      trajectories: rolled.trajectories,
      settings: { steps: 12, batchSize: 4, lr: 3e-3, warmupSteps: 1, actingMix: 0.25 },
      seed: 3,
    })
    assert.equal(s.skillPairs, skills.length)
    // acting data is the well-formed steps only (the micro policy writes many malformed responses)
    const valid = rolled.trajectories.reduce((n, t) => n + t.steps.filter((x) => x.valid).length, 0)
    assert.ok(valid < rolled.stats.stepSamples, 'the micro rollouts hold malformed steps')
    assert.equal(s.actingPairs, valid)
    assert.ok(s.lastLoss < s.firstLoss, `loss ${s.firstLoss} → ${s.lastLoss}`)
  })

  it('evaluates held-out seeds: one episode per task, rates consistent with the families', async () => {
    const e = await evaluate(policy, {
      env: config.env,
      split: 'test-seen',
      seedStart: 100,
      tasks: 5,
      temperature: 0.4,
      maxEnvSteps: 3,
      prompt: config.prompt,
      seed: 1,
    })
    assert.equal(e.tasks, 5)
    assert.equal(e.perFamily.sokoban?.tasks, 5)
    assert.equal(e.macroSuccessRate, e.successRate)
    assert.ok(e.meanLength >= 1 && e.meanLength <= 3)
  })
})
