// The trainer's in-graph optimizer against the JS AdamW it replaced (engine/optimizer.ts, the reference): at each
// of 20 steps, from the trainer's own state (weights and moments read back), the reference computes the
// gradients with a train graph that returns them, clips with the float64 global norm and steps AdamW in JS;
// the trainer's one run must land on the same weights and moments. Clipping active and inactive, weight decay
// on, and a non-finite step in the middle that must change nothing, on the bench shape and on LoRA adapters.
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import {
  AdamW,
  type AdamWState,
  clipScale,
  createLocalEngine,
  createWorkerEngine,
  type Engine,
  encodeModel,
  type Feeds,
  globalNorm,
  tensor,
} from '../../engine/index.ts'
import { mulberry32 } from '../../envs/rng.ts'
import { type ModelConfig, PRESETS } from '../../policy/config.ts'
import { initWeights } from '../../policy/init.ts'
import { initLora, type LoraConfig, loraSpecs } from '../../policy/lora.ts'
import { meanNll, meanNllFeeds } from '../../policy/losses.ts'
import { buildTrainGraph, IO } from '../../policy/model.ts'
import { parameterSpecs } from '../../policy/parameters.ts'
import { ropeTables } from '../../policy/rope.ts'
import {
  NonFiniteLossError,
  shares,
  splitRows,
  TRAINER_OPTIMIZER,
  Trainer,
  TrainerError,
} from '../../policy/trainer.ts'

const BENCH: ModelConfig = { ...PRESETS.bench, maxPositions: 64 }

/** A batch of `B` random sequences of 24 tokens with an 8-token context, and its mean-NLL mask. */
function batchOf(trainer: Trainer, seed: number, B = 2): Feeds {
  const rng = mulberry32(seed)
  const V = trainer.config.vocabSize
  const items = Array.from({ length: B }, () => {
    const seq = Array.from({ length: 24 }, () => Math.floor(rng.next() * V))
    return { context: seq.slice(0, 8), response: seq.slice(8) }
  })
  return meanNllFeeds(trainer.model, items)
}

/** d loss / d trained tensor from a train graph without the optimizer, fed every weight: the old train step's. */
async function legacyGradients(engine: Engine, trainer: Trainer, batch: Feeds): Promise<Map<string, Float32Array>> {
  const c = trainer.config
  const lora = trainer.lora
  const model = await engine.load(encodeModel(buildTrainGraph(c, meanNll, 'float32', lora ? { lora } : {})))
  const trained = await trainer.trained()
  const { cos, sin } = ropeTables(c, c.maxPositions)
  const feeds: Feeds = {
    ...batch,
    [IO.ropeCos]: tensor('float32', [c.maxPositions, c.headDim], cos),
    [IO.ropeSin]: tensor('float32', [c.maxPositions, c.headDim], sin),
  }
  const weights = lora ? trainer.base : trained
  for (const s of parameterSpecs(c)) feeds[s.name] = tensor('float32', s.shape, weights.get(s.name) as Float32Array)
  if (lora) for (const s of trainer.trainedSpecs()) feeds[s.name] = tensor('float32', s.shape, trained.get(s.name)!)
  const out = await engine.run(model, feeds)
  await engine.release(model)
  return new Map(trainer.trainedSpecs().map((s) => [s.name, out[`${s.name}_grad`]?.data as Float32Array]))
}

/** The JS AdamW's step from `before` (trained tensors and optimizer state) with these gradients. */
function referenceStep(
  before: { trained: Map<string, Float32Array>; state: AdamWState },
  gradients: Map<string, Float32Array>,
  settings: { lr: number; maxGradNorm: number; weightDecay: number },
): { trained: Map<string, Float32Array>; state: AdamWState; norm: number } {
  const adam = new AdamW({ weightDecay: settings.weightDecay, noDecay: TRAINER_OPTIMIZER.noDecay }, before.state)
  const grads = Object.fromEntries(gradients)
  const norm = globalNorm(grads)
  const params = Object.fromEntries([...before.trained].map(([k, v]) => [k, v.slice()]))
  adam.step(params, grads, settings.lr, clipScale(norm, settings.maxGradNorm))
  return { trained: new Map(Object.entries(params) as Array<[string, Float32Array]>), state: adam.state(), norm }
}

/** max over elements of |a − b| / (1 + |b|). */
function worst(a: ReadonlyMap<string, ArrayLike<number>>, b: ReadonlyMap<string, ArrayLike<number>>): number {
  let max = 0
  for (const [name, x] of a) {
    const y = b.get(name)
    assert.ok(y, `${name} is missing from the reference`)
    assert.equal(x.length, y.length, name)
    for (let i = 0; i < x.length; i++) max = Math.max(max, Math.abs(x[i]! - y[i]!) / (1 + Math.abs(y[i]!)))
  }
  return max
}

const stateMap = (s: AdamWState) => new Map(Object.entries(s.tensors))

async function matchesReferenceOver20Steps(engine: Engine, trainer: Trainer): Promise<void> {
  const settings = (step: number) => ({
    lr: 2e-3 * (1 - step / 40),
    // clipping active on even steps (the norm is far above 1e-2), inactive on odd ones
    maxGradNorm: step % 2 === 0 ? 1e-2 : 1e6,
    weightDecay: 0.1,
  })
  const train = await trainer.trainModel(meanNll, { outputGradients: true })
  let clipped = 0
  for (let step = 0; step < 20; step++) {
    const batch = batchOf(trainer, 100 + step)
    const before = { trained: await trainer.trained(), state: await trainer.optimizerState() }
    if (step === 10) {
      // a non-finite step in the middle: nothing changes, the step count included
      const poisoned = { ...batch, [IO.invTemperature]: tensor('float32', [], [Number.NaN]) }
      await assert.rejects(trainer.step(train, poisoned, settings(step)), (e: unknown) => {
        assert.ok(e instanceof NonFiniteLossError)
        assert.match(e.message, /loss is NaN; weights left unchanged/)
        return true
      })
      assert.equal(trainer.stepCount, before.state.step, 'the step count stays')
      assert.equal(worst(await trainer.trained(), before.trained), 0, 'the weights stay, bit for bit')
      assert.equal(worst(stateMap(await trainer.optimizerState()), stateMap(before.state)), 0, 'the moments stay')
    }
    const legacy = step === 0 ? await legacyGradients(engine, trainer, batch) : undefined
    const got = await trainer.step(train, batch, settings(step))
    assert.ok(got.gradients, 'the graph returns its gradients when asked')
    if (legacy) {
      // the gradients are the old train graph's (every weight fed, no optimizer) up to kernel rounding
      for (const [name, g] of legacy) {
        const mine = got.gradients.get(name) as Float32Array
        const scale = g.reduce((m, x) => Math.max(m, Math.abs(x)), 0)
        const diff = g.reduce((m, x, i) => Math.max(m, Math.abs(x - mine[i]!)), 0)
        assert.ok(diff <= 1e-4 * scale, `${name}: gradients differ by ${diff} (largest ${scale})`)
      }
    }
    const expected = referenceStep(before, got.gradients, settings(step))
    if (expected.norm > settings(step).maxGradNorm) clipped++
    assert.ok(
      Math.abs(got.gradNorm - expected.norm) <= 1e-6 * expected.norm,
      `step ${step}: norm ${got.gradNorm}, float64 reference ${expected.norm}`,
    )
    const dw = worst(await trainer.trained(), expected.trained)
    const state = await trainer.optimizerState()
    const dm = worst(stateMap(state), stateMap(expected.state))
    assert.ok(dw <= 1e-6, `step ${step}: weights differ by ${dw}·(1 + |w|)`)
    assert.ok(dm <= 1e-6, `step ${step}: moments differ by ${dm}·(1 + |m|)`)
    assert.equal(state.step, expected.state.step)
  }
  assert.equal(clipped, 10, 'clipping was active at every even step')
  assert.equal(trainer.stepCount, 20)
}

describe('Trainer: the optimizer inside the train graph', () => {
  const engine = createLocalEngine({ threads: 1 })
  after(() => engine.close())

  it('equals the JS AdamW over 20 steps on the bench shape (every weight)', async () => {
    const trainer = new Trainer(engine, BENCH, initWeights(BENCH, mulberry32(1)))
    await matchesReferenceOver20Steps(engine, trainer)
    await trainer.release()
  })

  it('equals the JS AdamW over 20 steps on LoRA adapters over a baked base', async () => {
    const lora: LoraConfig = { rank: 4, alpha: 8, dropout: 0, targets: ['q_proj', 'v_proj', 'down_proj'] }
    const rng = mulberry32(3)
    const adapters = initLora(BENCH, lora, rng)
    // B = 0 at init would make A's first gradients 0: start from a non-zero B
    for (const s of loraSpecs(BENCH, lora))
      (adapters.get(s.b.name) as Float32Array).forEach((_, i, b) => {
        b[i] = (rng.next() - 0.5) * 0.02
      })
    const trainer = new Trainer(engine, BENCH, initWeights(BENCH, mulberry32(2)), { lora: { config: lora, adapters } })
    await matchesReferenceOver20Steps(engine, trainer)
    await trainer.release()
  })
})

describe('Trainer: a step over micro-batches (gradient accumulation)', () => {
  const engine = createLocalEngine({ threads: 1 })
  after(() => engine.close())

  /** Sequences of different lengths (so that token shares differ from row shares), as one batch or in parts. */
  function sequences(seed: number, B: number) {
    const rng = mulberry32(seed)
    return Array.from({ length: B }, (_, b) => {
      const seq = Array.from({ length: 12 + 5 * b }, () => Math.floor(rng.next() * BENCH.vocabSize))
      return { context: seq.slice(0, 6), response: seq.slice(6) }
    })
  }
  const feedsOf = (trainer: Trainer, items: ReturnType<typeof sequences>) => meanNllFeeds(trainer.model, items)
  const tokens = (items: ReturnType<typeof sequences>) => items.reduce((n, s) => n + s.response.length, 0)

  it('sums the gradients of the whole batch, weighted by token shares, then steps AdamW once on them', async () => {
    const weights = initWeights(BENCH, mulberry32(5))
    const whole = new Trainer(engine, BENCH, weights)
    const parts = new Trainer(engine, BENCH, weights)
    const trainWhole = await whole.trainModel(meanNll, { outputGradients: true })
    const trainParts = await parts.trainModel(meanNll, { outputGradients: true })
    for (let step = 0; step < 3; step++) {
      // the whole batch from the same state as the parts
      await whole.setTrained(await parts.trained())
      await whole.loadOptimizerState(await parts.optimizerState())
      const before = { trained: await parts.trained(), state: await parts.optimizerState() }
      const items = sequences(40 + step, 6)
      const split = [items.slice(0, 2), items.slice(2, 5), items.slice(5)]
      const w = shares(split.map(tokens))
      // clipping active on the first step, inactive after
      const settings = { lr: 3e-3, maxGradNorm: step === 0 ? 1e-2 : 1e6, weightDecay: 0.1 }
      const a = await whole.step(trainWhole, feedsOf(whole, items), settings)
      const b = await parts.step(
        trainParts,
        split.map((p, i) => ({ feeds: feedsOf(parts, p), weight: w[i] as number })),
        settings,
      )
      assert.ok(Math.abs(a.loss - b.loss) <= 1e-5 * Math.abs(a.loss), `step ${step}: loss ${b.loss} vs ${a.loss}`)
      assert.ok(
        Math.abs(a.gradNorm - b.gradNorm) <= 1e-5 * a.gradNorm,
        `step ${step}: norm ${b.gradNorm} vs ${a.gradNorm}`,
      )
      // the summed gradients are the whole batch's up to float32 rounding (other sums, other kernels)
      for (const [name, g] of a.gradients as Map<string, Float32Array>) {
        const mine = b.gradients?.get(name) as Float32Array
        const scale = g.reduce((m, x) => Math.max(m, Math.abs(x)), 0)
        const diff = g.reduce((m, x, i) => Math.max(m, Math.abs(x - mine[i]!)), 0)
        assert.ok(diff <= 1e-5 * scale, `step ${step}, ${name}: gradients differ by ${diff} (largest ${scale})`)
      }
      // and the step is AdamW's on the sums (the JS reference on the same gradients; not the whole batch's
      // weights: AdamW's early steps turn the rounding of a gradient near 0 into up to a whole lr)
      const expected = referenceStep(before, b.gradients as Map<string, Float32Array>, settings)
      const dw = worst(await parts.trained(), expected.trained)
      const dm = worst(stateMap(await parts.optimizerState()), stateMap(expected.state))
      assert.ok(dw <= 1e-6, `step ${step}: weights differ by ${dw}·(1 + |w|)`)
      assert.ok(dm <= 1e-6, `step ${step}: moments differ by ${dm}·(1 + |m|)`)
    }
    assert.equal(parts.stepCount, 3)
    await whole.release()
    await parts.release()
  })

  it('splits a batch by microBatchRows into the micro-batches a caller would give, weighted by tokens', async () => {
    const weights = initWeights(BENCH, mulberry32(7))
    const auto = new Trainer(engine, BENCH, weights, { microBatchRows: 2 })
    const given = new Trainer(engine, BENCH, weights)
    const [trainAuto, trainGiven] = [await auto.trainModel(meanNll), await given.trainModel(meanNll)]
    const items = sequences(60, 5)
    const whole = feedsOf(auto, items)
    const parts = splitRows(whole, 2)
    assert.deepEqual(
      parts.map((p) => p.feeds[IO.ids]?.dims[0]),
      [2, 2, 1],
    )
    // the rows keep the whole batch's padding, so each part's tokens are its rows' response tokens
    const expected = shares([items.slice(0, 2), items.slice(2, 4), items.slice(4)].map(tokens))
    for (const [i, p] of parts.entries()) assert.ok(Math.abs(p.weight - (expected[i] as number)) < 1e-12)
    assert.deepEqual(
      splitRows(whole, 2, 'rows').map((p) => p.weight),
      [0.4, 0.4, 0.2],
    )
    const a = await auto.step(trainAuto, whole, { lr: 1e-3 })
    const b = await given.step(trainGiven, parts, { lr: 1e-3 })
    assert.equal(a.loss, b.loss)
    assert.equal(worst(await auto.trained(), await given.trained()), 0, 'the same runs, bit for bit')
    await auto.release()
    await given.release()
  })

  it('loads its micro-batch graphs again after the model released its sessions (a resident policy)', async () => {
    const trainer = new Trainer(engine, BENCH, initWeights(BENCH, mulberry32(8)), { microBatchRows: 2 })
    const items = sequences(70, 5)
    const first = await trainer.trainModel(meanNll)
    await trainer.step(first, feedsOf(trainer, items), { lr: 1e-3 })
    await trainer.model.release()
    const again = await trainer.trainModel(meanNll)
    const r = await trainer.step(again, feedsOf(trainer, items), { lr: 1e-3 })
    assert.ok(Number.isFinite(r.loss))
    assert.equal(trainer.stepCount, 2)
    // the handle of before the release is refused by name, not run against sessions that are gone
    await assert.rejects(trainer.step(first, feedsOf(trainer, items), { lr: 1e-3 }), TrainerError)
    await trainer.release()
  })

  it('changes nothing when a micro-batch before the last is not finite, and refuses negative weights', async () => {
    const trainer = new Trainer(engine, BENCH, initWeights(BENCH, mulberry32(6)))
    const train = await trainer.trainModel(meanNll)
    const items = sequences(50, 4)
    await trainer.step(train, feedsOf(trainer, items), { lr: 1e-3 })
    const before = { trained: await trainer.trained(), state: await trainer.optimizerState() }
    const poisoned = {
      ...feedsOf(trainer, items.slice(0, 2)),
      [IO.invTemperature]: tensor('float32', [], [Number.NaN]),
    }
    const micro = [
      { feeds: poisoned, weight: 0.5 },
      { feeds: feedsOf(trainer, items.slice(2)), weight: 0.5 },
    ]
    await assert.rejects(trainer.step(train, micro, { lr: 1e-3 }), NonFiniteLossError)
    assert.equal(trainer.stepCount, 1, 'the step count stays')
    assert.equal(worst(await trainer.trained(), before.trained), 0, 'the weights stay, bit for bit')
    assert.equal(worst(stateMap(await trainer.optimizerState()), stateMap(before.state)), 0, 'the moments stay')
    const halves = [micro[1], { ...micro[1], weight: -0.5 }] as typeof micro
    await assert.rejects(trainer.step(train, halves, { lr: 1e-3 }), TrainerError)
    await trainer.release()
  })
})

describe('Trainer: state stays in the engine', () => {
  it('sends no weight or moment into the engine after the first step, through the worker engine', async () => {
    const { meteredEngine } = await import('../../engine/index.ts')
    const engine = meteredEngine(createWorkerEngine({ threads: 1 }))
    try {
      const trainer = new Trainer(engine, BENCH, initWeights(BENCH, mulberry32(1)))
      const train = await trainer.trainModel(meanNll)
      await trainer.step(train, batchOf(trainer, 1), { lr: 1e-3 })
      await trainer.model.scoreModel()
      engine.reset()
      const batch = batchOf(trainer, 2)
      const batchBytes = Object.values(batch).reduce((n, t) => n + t.data.byteLength, 0)
      await trainer.step(train, batch, { lr: 1e-3 })
      await trainer.model.score([{ context: [1, 2, 3], response: [4, 5] }])
      const t = engine.traffic
      assert.equal(t.keptBytes, 0, 'nothing kept anew')
      assert.equal(t.loadedBytes, 0, 'no session loaded anew')
      const names = [...t.fedNames.keys()]
      const parameters = new Set(parameterSpecs(BENCH).map((s) => s.name))
      assert.deepEqual(
        names.filter((n) => parameters.has(n) || n.includes('exp_avg')),
        [],
        'no weight or moment was fed',
      )
      // the step's feeds: the batch and four scalars; the score's: its own small batch
      assert.ok(t.fedBytes < batchBytes + 1024, `${t.fedBytes} bytes fed for a ${batchBytes}-byte batch`)
      assert.ok(t.fetchedBytes < 4096, `${t.fetchedBytes} bytes fetched`)
      await trainer.release()
    } finally {
      await engine.close()
    }
  })
})

describe("Trainer: a base baked into a data file beside the model (over protobuf's 2 GB)", () => {
  it('scores and steps as the same base baked inside the model', async () => {
    const engine = createLocalEngine({ threads: 1 })
    try {
      const lora: LoraConfig = { rank: 4, alpha: 8, dropout: 0, targets: ['q_proj', 'v_proj'] }
      const base = initWeights(BENCH, mulberry32(2))
      const make = (externalDataBytes?: number) =>
        new Trainer(engine, BENCH, base, {
          lora: { config: lora, adapters: initLora(BENCH, lora, mulberry32(3)) },
          ...(externalDataBytes === undefined ? {} : { externalDataBytes }),
        })
      const inside = make()
      const beside = make(0)
      const items = [{ context: [5, 9, 11], response: [3, 7, 2] }]
      assert.deepEqual(await beside.model.score(items), await inside.model.score(items))
      const batch = batchOf(inside, 7)
      const a = await inside.step(await inside.trainModel(meanNll), batch, { lr: 1e-3 })
      const b = await beside.step(await beside.trainModel(meanNll), batch, { lr: 1e-3 })
      assert.equal(b.loss, a.loss)
      assert.equal(worst(await beside.trained(), await inside.trained()), 0)
    } finally {
      await engine.close()
    }
  })
})
