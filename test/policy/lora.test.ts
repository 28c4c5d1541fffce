// LoRA adapters: PEFT init and file layout, merged weights vs the adapter graph, adapter gradients vs finite
// differences (float64), and a train step that moves the adapters only.
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { CorePhaseError, toCheckpoint, withLora } from '../../compute/index.ts'
import { createLocalEngine, type Feeds, type Graph } from '../../engine/index.ts'
import { mulberry32 } from '../../envs/rng.ts'
import { type Checkpoint, CheckpointError, decodeCheckpoint, encodeCheckpoint } from '../../policy/checkpoint.ts'
import { exportStandaloneOnnx } from '../../policy/export.ts'
import { initWeights } from '../../policy/init.ts'
import {
  decodePeftAdapter,
  encodePeftAdapter,
  initLora,
  LORA_TARGETS,
  type LoraConfig,
  LoraError,
  loraSpecs,
  mergeLora,
} from '../../policy/lora.ts'
import { meanNll, meanNllFeeds } from '../../policy/losses.ts'
import { buildScoreGraph, buildTrainGraph, IO } from '../../policy/model.ts'
import { parameterSpecs } from '../../policy/parameters.ts'
import { decodeSafetensors } from '../../policy/safetensors.ts'
import { policyModel, Trainer } from '../../policy/trainer.ts'
import { parseRunConfig, runConfig } from '../../seed/config.ts'
import { smokeSokobanPreset } from '../../seed/presets/smoke.ts'
import { SMALL } from './small-config.ts'

const ALL: LoraConfig = { rank: 4, alpha: 8, dropout: 0, targets: LORA_TARGETS }

/** Adapters with a non-zero B (a fresh adapter's B is 0, which would hide a wrong B path). */
function trainedAdapters(lora: LoraConfig, seed: number, std = 0.2): Map<string, Float32Array> {
  const rng = mulberry32(seed)
  const adapters = initLora(SMALL, lora, rng)
  for (const s of loraSpecs(SMALL, lora)) {
    const b = adapters.get(s.b.name) as Float32Array
    for (let i = 0; i < b.length; i++) b[i] = (2 * rng.next() - 1) * std
  }
  return adapters
}

describe('LoRA adapters (policy/lora.ts)', () => {
  it('names every adapter pair as PEFT does, A (r, in) and B (out, r)', () => {
    const specs = loraSpecs(SMALL, { ...ALL, targets: ['q_proj', 'down_proj'] })
    assert.deepEqual(
      specs.map((s) => [s.a.name, s.a.shape, s.b.name, s.b.shape]),
      [0, 1].flatMap((l) => [
        [
          `model.layers.${l}.self_attn.q_proj.lora_A.weight`,
          [4, 32],
          `model.layers.${l}.self_attn.q_proj.lora_B.weight`,
          [32, 4],
        ],
        [
          `model.layers.${l}.mlp.down_proj.lora_A.weight`,
          [4, 48],
          `model.layers.${l}.mlp.down_proj.lora_B.weight`,
          [32, 4],
        ],
      ]),
    )
  })

  it('initialises A ~ U(−1/√in, 1/√in) and B = 0, the same for the same seed', () => {
    const a = initLora(SMALL, ALL, mulberry32(3))
    const b = initLora(SMALL, ALL, mulberry32(3))
    for (const s of loraSpecs(SMALL, ALL)) {
      const A = a.get(s.a.name) as Float32Array
      const bound = 1 / Math.sqrt(s.a.shape[1])
      assert.ok(A.every((v) => Math.abs(v) <= bound))
      assert.ok(Math.max(...A.map(Math.abs)) > 0.8 * bound, `${s.a.name} spans its range`)
      assert.ok((a.get(s.b.name) as Float32Array).every((v) => v === 0))
      assert.deepEqual(A, b.get(s.a.name))
    }
  })

  it('writes adapter_config.json and adapter_model.safetensors in the PEFT layout and reads them back', () => {
    const lora: LoraConfig = { rank: 4, alpha: 16, dropout: 0, targets: ['q_proj', 'v_proj', 'up_proj'] }
    const adapters = trainedAdapters(lora, 4)
    const files = encodePeftAdapter(SMALL, lora, adapters, 'base/checkpoint')
    const config = JSON.parse(Buffer.from(files.config).toString('utf8'))
    assert.deepEqual(
      [config.peft_type, config.task_type, config.r, config.lora_alpha, config.lora_dropout, config.bias],
      ['LORA', 'CAUSAL_LM', 4, 16, 0, 'none'],
    )
    assert.deepEqual(config.target_modules, ['q_proj', 'v_proj', 'up_proj'])
    assert.equal(config.base_model_name_or_path, 'base/checkpoint')
    const names = [...decodeSafetensors(files.model).tensors.keys()]
    assert.ok(names.includes('base_model.model.model.layers.1.mlp.up_proj.lora_B.weight'), names.join(', '))
    assert.equal(names.length, 2 * 3 * SMALL.numLayers)
    const back = decodePeftAdapter(SMALL, files)
    assert.deepEqual(back.lora, lora)
    assert.deepEqual(back.adapters, adapters)
  })

  it('refuses an adapter whose tensors do not match its config', () => {
    const adapters = trainedAdapters(ALL, 4)
    adapters.delete('model.layers.1.mlp.up_proj.lora_A.weight')
    assert.throws(
      () => encodePeftAdapter(SMALL, ALL, adapters, ''),
      new LoraError('adapter: adapter tensor model.layers.1.mlp.up_proj.lora_A.weight is missing'),
    )
  })
})

/** Nodes of `opType` that some output needs (what encoding keeps). */
function liveOps(graph: Graph, opType: string): number {
  const needed = new Set(graph.outputs.map((v) => v.id))
  let n = 0
  for (let i = graph.nodes.length - 1; i >= 0; i--) {
    const node = graph.nodes[i] as Graph['nodes'][number]
    if (!node.outputs.some((y) => needed.has(y.id))) continue
    if (node.opType === opType) n++
    for (const x of node.inputs) if (x) needed.add(x.id)
  }
  return n
}

describe('LoRA graphs', () => {
  const engine = createLocalEngine({ threads: 1, graphOptimizationLevel: 'basic' }) // float64 SwiGLU needs 'basic'
  after(() => engine.close())
  const weights = initWeights(SMALL, mulberry32(5), 0.3)
  const sequences = [
    [5, 9, 11, 3, 7, 2, 8],
    [4, 4, 30],
  ]

  it('gives the logits of the merged weights W + (alpha/r)·B·A (float64, every target)', async (t) => {
    const adapters = trainedAdapters(ALL, 8)
    const withAdapters = policyModel(engine, SMALL, weights, { dtype: 'float64', lora: { config: ALL, adapters } })
    const merged = policyModel(engine, SMALL, mergeLora(weights, adapters, SMALL, ALL), { dtype: 'float64' })
    const plain = policyModel(engine, SMALL, weights, { dtype: 'float64' })
    const [a, m, p] = await Promise.all([withAdapters, merged, plain].map((model) => model.logits(sequences)))
    let gap = 0
    let effect = 0
    a?.forEach((row, i) => {
      row.forEach((v, j) => {
        gap = Math.max(gap, Math.abs(v - (m?.[i]?.[j] as number)))
        effect = Math.max(effect, Math.abs(v - (p?.[i]?.[j] as number)))
      })
    })
    t.diagnostic(`max |Δlogit| adapter graph vs merged ${gap.toExponential(2)}; adapters vs base ${effect.toFixed(3)}`)
    // the merge rounds W + ΔW to float32 once: the gap is float32 rounding of the weights, not float64's
    assert.ok(gap < 1e-5, `adapter graph vs merged weights: max |Δlogit| ${gap}`)
    assert.ok(effect > 0.1, `the adapters change the logits (max |Δ| ${effect})`)
  })

  it('gives the base model exactly with fresh adapters (B = 0)', async () => {
    const fresh = policyModel(engine, SMALL, weights, {
      dtype: 'float64',
      lora: { config: ALL, adapters: initLora(SMALL, ALL, mulberry32(1)) },
    })
    const plain = policyModel(engine, SMALL, weights, { dtype: 'float64' })
    assert.deepEqual(
      await fresh.score([{ context: [3, 4], response: [5, 6] }]),
      await plain.score([{ context: [3, 4], response: [5, 6] }]),
    )
  })

  it('builds gradients of the adapters only: no base-weight gradient output', () => {
    const graph = buildTrainGraph(SMALL, meanNll, 'float32', { lora: ALL })
    const outputs = graph.outputs.map((o) => o.name)
    const grads = outputs.filter((n) => n.endsWith('_grad'))
    assert.equal(grads.length, 2 * 7 * SMALL.numLayers)
    assert.ok(grads.every((n) => /\.lora_[AB]\.weight_grad$/.test(n)))
    // backward MatMuls: at most 2 per attention product (q·kᵀ, p·v), 1 per frozen projection and the LM head (the
    // input's gradient only: no weight gradient), 4 per adapter pair (x·Aᵀ and ·Bᵀ, each input's gradient)
    const L = SMALL.numLayers
    const backward = liveOps(graph, 'MatMul') - liveOps(buildScoreGraph(SMALL, 'float32', { lora: ALL }), 'MatMul')
    assert.ok(backward <= 2 * 2 * L + (7 * L + 1) + 4 * 7 * L, `${backward} backward MatMuls`)
    const fullBackward = liveOps(buildTrainGraph(SMALL, meanNll), 'MatMul') - liveOps(buildScoreGraph(SMALL), 'MatMul')
    assert.equal(fullBackward, 2 * (2 * L + 7 * L + 1)) // the full graph: both inputs' gradients of every product
  })

  it('has adapter gradients equal to directional finite differences (float64, every A and B)', async (t) => {
    const lora: LoraConfig = { rank: 3, alpha: 6, dropout: 0, targets: LORA_TARGETS }
    const adapters = trainedAdapters(lora, 12, 0.3)
    const model = policyModel(engine, SMALL, weights, { dtype: 'float64', lora: { config: lora, adapters } })
    // a masked mean NLL in the model's dtype (meanNll is float32)
    const train = await model.gradientModel((op, scores, dtype) => {
      const mask = op.input('mask', dtype, ['B', 'T'])
      return { loss: op.Neg(op.ReduceSum(op.Mul(scores.logp, mask), undefined, { keepdims: 0 })) }
    })
    const batch = model.tokenBatch(
      [
        { context: [3, 8, 1], response: [9, 14, 2, 7] },
        { context: [5], response: [6, 6, 40] },
      ],
      0.8,
    )
    const feeds: Feeds = {
      ...batch.feeds,
      ...(await model.trainedFeeds()),
      mask: model.float([batch.B, batch.T], batch.responseMask),
    }
    const out = await engine.run(train, feeds)
    const dir = mulberry32(21)
    let worst = 0
    for (const spec of model.parameters.trainedSpecs()) {
      const base = feeds[spec.name]?.data as Float64Array
      const direction = Float64Array.from(base, () => dir.next() * 2 - 1)
      const lossAt = async (h: number) => {
        const data = Float64Array.from(base, (v, i) => v + h * (direction[i] as number))
        const r = await engine.run(train, { ...feeds, [spec.name]: model.float(spec.shape, data) })
        return Number(r[IO.loss]?.data[0])
      }
      const h = 1e-5
      const numeric = ((await lossAt(h)) - (await lossAt(-h))) / (2 * h)
      const grad = out[`${spec.name}_grad`]?.data as Float64Array
      const analytic = direction.reduce((acc, d, i) => acc + d * (grad[i] as number), 0)
      worst = Math.max(worst, Math.abs(analytic - numeric) / (1e-7 + Math.abs(numeric)))
      assert.ok(
        Math.abs(analytic - numeric) <= 1e-7 + 1e-5 * Math.abs(numeric),
        `${spec.name}: analytic ${analytic} vs numeric ${numeric}`,
      )
    }
    t.diagnostic(
      `worst relative gap analytic vs finite difference over ${model.parameters.trainedSpecs().length} tensors: ${worst.toExponential(2)}`,
    )
    assert.ok(worst < 1e-5)
  })

  it('trains the adapters and leaves the base weights unchanged', async () => {
    const adapters = initLora(SMALL, ALL, mulberry32(2))
    const trainer = new Trainer(engine, SMALL, weights, { lora: { config: ALL, adapters } })
    const model = trainer.model
    const before = new Map([...weights].map(([k, v]) => [k, v.slice()]))
    const adaptersBefore = new Map([...adapters].map(([k, v]) => [k, v.slice()]))
    const train = await trainer.trainModel(meanNll)
    const feeds = meanNllFeeds(model, [{ context: [3, 8, 1], response: [9, 14, 2, 7] }])
    const first = await trainer.step(train, feeds, { lr: 1e-2, weightDecay: 0 })
    for (let i = 0; i < 5; i++) await trainer.step(train, feeds, { lr: 1e-2, weightDecay: 0 })
    const last = await trainer.step(train, feeds, { lr: 1e-2, weightDecay: 0 })
    assert.ok(last.loss < first.loss, `loss ${first.loss} → ${last.loss}`)
    for (const spec of parameterSpecs(SMALL)) assert.deepEqual(weights.get(spec.name), before.get(spec.name))
    assert.deepEqual(adapters, adaptersBefore, 'the arrays given are not changed: the engine keeps the trained ones')
    const trained = await trainer.trained()
    const moved = [...trained].filter(([k, v]) => v.some((x, i) => x !== adaptersBefore.get(k)?.[i]))
    assert.equal(moved.length, adapters.size)
    assert.deepEqual(
      Object.keys((await trainer.optimizerState()).tensors).sort(),
      [...adapters.keys()].flatMap((k) => [`${k}.exp_avg`, `${k}.exp_avg_sq`]).sort(),
    )
  })
})

describe('LoRA checkpoints and run config', () => {
  const engine = createLocalEngine({ threads: 1 })
  after(() => engine.close())
  const weights = initWeights(SMALL, mulberry32(5), 0.3)
  const lora: LoraConfig = { rank: 4, alpha: 8, dropout: 0, targets: ['q_proj', 'v_proj', 'down_proj'] }

  it('stores merged weights in model.safetensors, the PEFT adapter and the base beside; loads the adapter graphs back', async () => {
    const adapters = trainedAdapters(lora, 31)
    const trainer = new Trainer(engine, SMALL, weights, { lora: { config: lora, adapters } })
    const trained = trainer.model
    const policy = { trainer, model: trained, codec: undefined as never, checkpoint: checkpointOf(weights) }
    const files = encodeCheckpoint(await toCheckpoint(policy))
    assert.deepEqual(Object.keys(files).sort(), [
      'adapter/adapter_config.json',
      'adapter/adapter_model.safetensors',
      'config.json',
      'lora_base.safetensors',
      'model.safetensors',
    ])
    const back = decodeCheckpoint(files)
    assert.deepEqual(back.lora?.config, lora)
    assert.deepEqual(back.lora?.base, weights)
    assert.deepEqual(back.lora?.adapters, adapters)
    assert.deepEqual(back.weights, mergeLora(weights, adapters, SMALL, lora))
    const items = [{ context: [3, 4, 9], response: [5, 6, 1] }]
    const loaded = policyModel(engine, SMALL, back.lora?.base as Map<string, Float32Array>, {
      lora: { config: lora, adapters: back.lora?.adapters as Map<string, Float32Array> },
    })
    assert.deepEqual(await loaded.score(items), await trained.score(items))
    const merged = await policyModel(engine, SMALL, back.weights).score(items)
    const exact = await trained.score(items)
    const gap = Math.max(...(merged[0]?.logprobs ?? []).map((v, i) => Math.abs(v - (exact[0]?.logprobs[i] as number))))
    assert.ok(gap < 1e-4, `merged-weight log-probs vs the adapter graph's: ${gap}`)
  })

  it('exports a standalone ONNX model with the adapters merged into its weights', async () => {
    const adapters = trainedAdapters(lora, 17)
    const trainer = new Trainer(engine, SMALL, weights, { lora: { config: lora, adapters } })
    const model = trainer.model
    const standalone = await engine.load(await exportStandaloneOnnx(trainer, 'forward'))
    const sequence = [3, 8, 1, 9, 14, 2]
    const feeds = model.tokenBatch([{ context: sequence, response: [] }], 1).feeds
    const onlyInputs = Object.fromEntries(
      Object.entries(feeds).filter(([k]) => [IO.ids, IO.positions, IO.valid].includes(k as never)),
    )
    const exported = (await engine.run(standalone, onlyInputs))[IO.logits]?.data as Float32Array
    const ours = (await model.logits([sequence]))[0] as Float64Array
    const plain = (await policyModel(engine, SMALL, weights).logits([sequence]))[0] as Float64Array
    const gap = (a: ArrayLike<number>) => Math.max(...Array.from(ours, (v, i) => Math.abs(v - (a[i] as number))))
    assert.ok(gap(exported) < 1e-4, `exported vs adapter graph: ${gap(exported)}`)
    assert.ok(gap(plain) > 0.05, `the adapters matter (${gap(plain)})`)
  })

  it('refuses a LoRA checkpoint that lacks its base', async () => {
    const trainer = new Trainer(engine, SMALL, weights, { lora: { config: lora, adapters: trainedAdapters(lora, 3) } })
    const policy = { trainer, model: trainer.model, codec: undefined as never, checkpoint: checkpointOf(weights) }
    const { 'lora_base.safetensors': _base, ...files } = encodeCheckpoint(await toCheckpoint(policy))
    assert.throws(
      () => decodeCheckpoint(files, 'ck/'),
      new CheckpointError(
        'ck/: a LoRA checkpoint needs adapter/adapter_config.json, adapter/adapter_model.safetensors and lora_base.safetensors',
      ),
    )
  })

  it('puts fresh adapters on a policy without them and refuses another adapter shape on one with them', async () => {
    const trainer = new Trainer(engine, SMALL, weights)
    const policy = { trainer, model: trainer.model, codec: undefined as never, checkpoint: checkpointOf(weights) }
    assert.equal(await withLora(policy, lora, 7), true)
    assert.deepEqual(policy.model.lora, lora)
    assert.deepEqual(policy.trainer.base, weights, 'the adapters sit over the weights as they were')
    assert.equal(await withLora(policy, { ...lora }, 8), false, 'the same config keeps the trained adapters')
    await assert.rejects(
      withLora(policy, { ...lora, rank: 8 }, 7),
      new CorePhaseError(
        "the checkpoint's LoRA adapter (rank 4, alpha 8, targets q_proj, v_proj, down_proj) is not model.lora " +
          "(rank 8, alpha 8, targets q_proj, v_proj, down_proj): an adapter's shape cannot change within a run",
      ),
    )
  })

  it('gives model.lora PEFT defaults and refuses dropout', () => {
    const base = smokeSokobanPreset()
    const parsed = runConfig({ ...base, model: { ...base.model, lora: {} } })
    assert.deepEqual(parsed.model.lora, { rank: 8, alpha: 8, dropout: 0, targets: ['q_proj', 'v_proj'] })
    const refused = parseRunConfig({ ...base, model: { ...base.model, lora: { dropout: 0.05 } } })
    assert.ok(!refused.ok)
    assert.ok(
      refused.problems.some((p) => p.includes('model.lora.dropout') && p.includes('LoRA dropout is not implemented')),
      refused.problems.join('\n'),
    )
  })
})

function checkpointOf(weights: Map<string, Float32Array>): Checkpoint {
  return { config: SMALL, weights, eosIds: [2] }
}
