import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { annotateStage1, loadPolicy, polishCheck, trainStage1, type WarmstartResult } from '../../compute/index.ts'
import { CorePhaseError } from '../../compute/policy.ts'
import { poolLossStats, type SupervisedExample, supervisedTrain } from '../../compute/supervised.ts'
import { actionBalanceWeights, demonstrations, demoResponse, frameWeights } from '../../compute/warmstart.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { getEnv } from '../../envs/index.ts'
import type { Checkpoint } from '../../policy/checkpoint.ts'
import { cpuHouseholdPreset, cpuSokobanPreset } from '../../seed/presets/cpu.ts'
import { microCheckpoint, microConfig, microPolicy, microWarmstart, microWarmstartInput } from './micro.ts'

describe('actionBalanceWeights', () => {
  it('weighs each action kind by its frequency to the power -balance, with mean 1', () => {
    const actions = ['go to a 1', 'go to b 1', 'go to a 1', 'take x 1 from a 1']
    const w = actionBalanceWeights(actions, 0.5)
    // raw: go 0.75^-0.5 = 1.1547, take 0.25^-0.5 = 2; mean (3 * 1.1547 + 2) / 4 = 1.3660
    assert.ok(Math.abs(w('go to b 1') - 0.845299) < 1e-5, String(w('go to b 1')))
    assert.ok(Math.abs(w('take x 1 from a 1') - 1.464102) < 1e-5)
    assert.ok(Math.abs(actions.reduce((sum, a) => sum + w(a), 0) / actions.length - 1) < 1e-12)
    assert.equal(actionBalanceWeights(actions, 0)('take x 1 from a 1'), 1)
  })
})

describe('frameWeights', () => {
  it('weighs the shared prefix and suffix of the responses as the frame', () => {
    const weigh = frameWeights(
      [
        [1, 2, 3, 9, 4, 5],
        [1, 2, 3, 8, 4, 5],
        [1, 2, 3, 7, 7, 4, 5],
      ],
      0.1,
    )
    assert.deepEqual(weigh([1, 2, 3, 7, 7, 4, 5]), [0.1, 0.1, 0.1, 1, 1, 0.1, 0.1])
    assert.deepEqual(weigh([1, 2, 3, 9, 4, 5]), [0.1, 0.1, 0.1, 1, 0.1, 0.1])
  })
  it('never lets prefix and suffix overlap, and has no frame for a single response', () => {
    assert.deepEqual(
      frameWeights(
        [
          [1, 2],
          [1, 2, 2],
        ],
        0,
      )([1, 2, 2]),
      [0, 0, 1],
    )
    assert.deepEqual(frameWeights([[1, 2, 3]], 0)([1, 2, 3]), [1, 1, 1])
  })
})

describe('supervisedTrain token weights', () => {
  const engine = createLocalEngine({ threads: 1 })
  after(() => engine.close())
  let checkpoint: Checkpoint
  before(async () => {
    checkpoint = await microCheckpoint(engine, microConfig())
  })
  const firstLoss = async (examples: SupervisedExample[]) => {
    const policy = microPolicy(engine, checkpoint)
    const r = await supervisedTrain(policy, [{ name: 'x', examples, share: 1 }], {
      steps: 1,
      batchSize: 1,
      lr: 1e-3,
      warmupSteps: 0,
      seed: 1,
    })
    await policy.model.release()
    return r.losses[0]!
  }

  it('a token of weight 0 does not count; without weights it does', async () => {
    const context = [3, 4, 5]
    const a = await firstLoss([{ context, response: [6, 7], weights: [1, 0] }])
    const b = await firstLoss([{ context, response: [6, 8], weights: [1, 0] }])
    const only = await firstLoss([{ context, response: [6] }])
    assert.ok(Math.abs(a - b) < 1e-6, `${a} vs ${b}`)
    assert.ok(Math.abs(a - only) < 1e-6, `${a} vs ${only}`)
    const plainA = await firstLoss([{ context, response: [6, 7] }])
    const plainB = await firstLoss([{ context, response: [6, 8] }])
    assert.ok(Math.abs(plainA - plainB) > 1e-6)
  })

  it('is the weighted mean of the token losses', async () => {
    const context = [3, 4, 5]
    const l6 = await firstLoss([{ context, response: [6] }])
    const both = await firstLoss([{ context, response: [6, 7] }])
    const l7 = 2 * both - l6 // mean of two tokens
    const weighted = await firstLoss([{ context, response: [6, 7], weights: [1, 0.25] }])
    assert.ok(Math.abs(weighted - (l6 + 0.25 * l7) / 1.25) < 1e-5, `${weighted}`)
  })

  it('tells onStep each step and its loss, as progress', async () => {
    const policy = microPolicy(engine, checkpoint)
    const told: Array<[number, number]> = []
    const r = await supervisedTrain(
      policy,
      [{ name: 'x', examples: [{ context: [3, 4], response: [6, 7] }], share: 1 }],
      {
        steps: 3,
        batchSize: 1,
        lr: 1e-3,
        warmupSteps: 0,
        seed: 1,
        onStep: (step, loss) => told.push([step, loss]),
      },
    )
    await policy.model.release()
    assert.deepEqual(
      told,
      r.losses.map((loss, i) => [i + 1, loss]),
    )
    assert.equal(told.length, 3)
  })

  it("reports each pool's first and last losses over the steps that drew it", async () => {
    const a = { context: [3, 4], response: [6, 7] }
    const b = { context: [5, 3, 4, 5], response: [8] }
    const la = await firstLoss([a])
    const lb = await firstLoss([b])
    const policy = microPolicy(engine, checkpoint)
    // lr 0: the weights stay, so each pool's loss is the same at every step it is drawn
    const r = await supervisedTrain(
      policy,
      [
        { name: 'a', examples: [a], share: 1 },
        { name: 'b', examples: [b], share: 1 },
        { name: 'off', examples: [a], share: 0 },
      ],
      { steps: 40, batchSize: 1, lr: 0, warmupSteps: 0, seed: 3 },
    )
    await policy.model.release()
    assert.deepEqual(
      r.pools.map((p) => p.name),
      ['a', 'b'],
    )
    const [pa, pb] = r.pools
    assert.equal(pa!.steps + pb!.steps, 40)
    assert.ok(pa!.steps > 5 && pb!.steps > 5, `${pa!.steps} and ${pb!.steps} steps`)
    for (const [p, l] of [
      [pa!, la],
      [pb!, lb],
    ] as const) {
      assert.ok(Math.abs(p.firstLoss - l) < 1e-5 && Math.abs(p.lastLoss - l) < 1e-5, `${p.name}: ${p.firstLoss}, ${l}`)
    }
    assert.ok(Math.abs(la - lb) > 1e-3)
    assert.deepEqual(Object.keys(poolLossStats(r.pools)).sort(), [
      'aFirstLoss',
      'aLastLoss',
      'aSteps',
      'bFirstLoss',
      'bLastLoss',
      'bSteps',
    ])
  })

  it('rejects weights that do not match the response', async () => {
    await assert.rejects(firstLoss([{ context: [3, 4], response: [6, 7], weights: [1] }]), CorePhaseError)
  })
})

describe('warmstart', () => {
  it('writes the expert thought into demonstrated responses with expertThoughts, where the env has one', async () => {
    const household = cpuHouseholdPreset()
    const ws = household.warmstart
    assert.ok(ws)
    const env = getEnv('household')
    const think = await demonstrations('household', { ...ws, demoTasks: 6, expertThoughts: true }, household.prompt, 1)
    const plainLabels = await demonstrations(
      'household',
      { ...ws, demoTasks: 6, expertThoughts: false },
      household.prompt,
      1,
    )
    // the same episodes, the same prompts and actions; only the responses think
    assert.deepEqual(
      think.plain.map((d) => [d.prompt, d.action]),
      plainLabels.plain.map((d) => [d.prompt, d.action]),
    )
    for (const d of think.plain) {
      assert.match(d.thought ?? '', /^(find|heat|cool|clean|put|drop) /)
      assert.equal(demoResponse(env, d), `<think>${d.thought}</think><action>${d.action}</action>`)
      assert.ok(think.corpus.includes(demoResponse(env, d)))
    }
    for (const d of plainLabels.plain) assert.equal(demoResponse(env, d), `<think></think><action>${d.action}</action>`)
    const sokoban = cpuSokobanPreset()
    assert.ok(sokoban.warmstart)
    const grid = await demonstrations(
      'sokoban',
      { ...sokoban.warmstart, demoTasks: 4, expertThoughts: true },
      sokoban.prompt,
      1,
    )
    assert.ok(grid.plain.length > 0 && grid.plain.every((d) => d.thought === undefined))
  })

  it('behaviour-clones with weighted frames, then polishes the frame at full weight', async () => {
    const engine = createLocalEngine({ threads: 1 })
    try {
      const config = microConfig()
      const r = await microWarmstart(engine, config)
      assert.equal(r.stats.steps, config.warmstart?.steps)
      assert.equal(r.stats.polishSteps, 2)
      assert.ok(r.stats.polishLoss !== null && Number.isFinite(r.stats.polishLoss))
      // the polish loss is the plain token mean, dominated by the frame the weighted pass barely trained
      assert.ok(r.stats.polishLoss > 0)
      assert.equal(r.stats.analyzerPairs, 0)
    } finally {
      await engine.close()
    }
  })

  it('with keepBest, returns the weights of the best validation check, not the last step', async () => {
    const engine = createLocalEngine({ threads: 1 })
    try {
      const base = microConfig()
      assert.ok(base.warmstart)
      const run = (steps: number, keepBest: boolean) =>
        microWarmstart(engine, {
          ...base,
          warmstart: { ...base.warmstart!, steps, evalEvery: 2, targetSuccess: 1, keepBest, framePolishSteps: 0 },
        })
      const weights = (r: WarmstartResult) => [...r.checkpoint.weights.values()].map((w) => [...w])
      // 3 steps, checked at step 2 only: the kept weights are step 2's, not the last step's
      const last = await run(3, false)
      const kept = await run(3, true)
      assert.equal(last.stats.keptStep, 3)
      assert.equal(kept.stats.keptStep, 2)
      assert.deepEqual(
        kept.stats.checks.map((c) => c.step),
        [2],
      )
      assert.notDeepEqual(weights(kept), weights(last))
      // checked at steps 2 and 4; equal successes keep the later one, here the last step: the same weights
      const four = await run(4, true)
      assert.deepEqual(
        four.stats.checks.map((c) => c.step),
        [2, 4],
      )
      const [a, b] = four.stats.checks.map((c) => c.successRate)
      assert.equal(four.stats.keptStep, (a as number) > (b as number) ? 2 : 4)
      if (four.stats.keptStep === 4) assert.deepEqual(weights(four), weights(await run(4, false)))
    } finally {
      await engine.close()
    }
  })

  it("evaluates the kept weights just before and just after the polish, on four times the checks' tasks", async () => {
    const engine = createLocalEngine({ threads: 1 })
    try {
      const base = microConfig()
      assert.ok(base.warmstart)
      // 60 steps at a high rate: the micro model then writes some well-formed responses, so the two differ
      const config = (framePolishSteps: number, steps = 60, evalEvery = 30) => ({
        ...base,
        warmstart: {
          ...base.warmstart!,
          steps,
          evalEvery,
          evalTasks: 16,
          lr: 1e-2,
          formatTokenWeight: 1,
          targetSuccess: 1,
          keepBest: true,
          framePolishSteps,
        },
        evaluation: { ...base.evaluation, temperature: 1 },
      })
      const polished = await microWarmstart(engine, config(2))
      const unpolished = await microWarmstart(engine, config(0))
      assert.equal(unpolished.stats.polishCheck, null)
      assert.equal((await microWarmstart(engine, config(2, 1, 0))).stats.polishCheck, null)
      const p = polished.stats.polishCheck
      assert.ok(p)
      // "before" is the kept step's weights (= the unpolished run's checkpoint), "after" the returned ones
      const input = microWarmstartInput(config(2))
      assert.deepEqual(p.before, await polishCheck(loadPolicy(engine, unpolished.checkpoint), input))
      assert.deepEqual(p.after, await polishCheck(loadPolicy(engine, polished.checkpoint), input))
      assert.ok(p.before.invalidRate < 1)
      assert.notDeepEqual(p.before, p.after)
    } finally {
      await engine.close()
    }
  })

  it('Stage 1 can replay exactly the warm-start demonstrations as its acting data', async () => {
    const engine = createLocalEngine({ threads: 1 })
    try {
      const base = microConfig()
      const ws = base.warmstart
      assert.ok(ws)
      const config = { ...base, stage1: { ...base.stage1, actingData: 'demonstrations' as const } }
      const policy = loadPolicy(engine, (await microWarmstart(engine, config)).checkpoint)
      const annotation = await annotateStage1(policy, config)
      const stats = await trainStage1(policy, annotation, config)
      const demos = await demonstrations(config.env, ws, config.prompt, config.seed)
      assert.ok(demos.plain.length > 0 && demos.skilled.length > 0)
      assert.equal(stats.actingPairs, demos.plain.length + demos.skilled.length)
      assert.equal(stats.steps, config.stage1.steps)
      await policy.model.release()
    } finally {
      await engine.close()
    }
  })

  it('with analyzerShare, also trains on one analyzer demonstration per demonstration episode', async () => {
    const engine = createLocalEngine({ threads: 1 })
    try {
      const base = microConfig()
      const ws = base.warmstart
      assert.ok(ws)
      const config = { ...base, warmstart: { ...ws, analyzerShare: 0.5, analyzerBatchSize: 2 } }
      const r = await microWarmstart(engine, config)
      assert.equal(r.stats.analyzerPairs, ws.demoTasks)
      assert.ok(Number.isFinite(r.stats.lastLoss))
      // a different share of steps gives different weights
      const plain = await microWarmstart(engine, base)
      const w = (c: typeof r.checkpoint) => [...c.weights.values()][0]
      assert.notDeepEqual(w(r.checkpoint), w(plain.checkpoint))
    } finally {
      await engine.close()
    }
  })
})
