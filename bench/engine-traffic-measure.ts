// What bench/engine-traffic.ts measures, written once for both trees: the models (the main job's built-in model,
// SmolLM2-135M's shape with LoRA r 16 on q_proj, v_proj and fully fine-tuned), their batches and prompts, and the
// count of one train step and one decode step through a metered worker engine. A tree (before or after issue 42's
// trainer) is an adapter that makes the policy and steps it with that tree's own API; the counting wrapper is
// engine/metered.ts's for both (it imports nothing at run time, and the old engine has every method it calls).
import { ADAMW_IO } from '../engine/adamw-graph.ts'
import { createWorkerEngine, type Engine, type Feeds, type ModelHandle } from '../engine/index.ts'
import { type MeteredEngine, meteredEngine } from '../engine/metered.ts'
import { mulberry32 } from '../envs/rng.ts'
import type { ModelConfig } from '../policy/config.ts'
import { DecodeBatch } from '../policy/decode-batch.ts'
import { initWeights } from '../policy/init.ts'
import { initLora, type LoraConfig, loraSpecs } from '../policy/lora.ts'
import { meanNll, meanNllFeeds } from '../policy/losses.ts'
import { parameterSpecs } from '../policy/parameters.ts'
import { Trainer } from '../policy/trainer.ts'
import { CPU_SOKOBAN } from '../seed/presets/cpu.ts'
import { smollm2Config } from './smollm2-shape.ts'

export const TRAFFIC_THREADS = Number(process.env.SEEDFLOW_THREADS ?? 2)
/** Decode: rows of one DecodeBatch, tokens per prompt, tokens of room after the prompt. */
export const DECODE = { rows: 8, prompt: 32, room: 8 }

export interface TrafficModel {
  name: string
  config: ModelConfig
  lora?: LoraConfig
  /** The train batch: B sequences of T tokens (one context token, T − 1 scored). */
  batch: { B: number; T: number }
  note: string
}

const SMOLLM2_LORA: LoraConfig = { rank: 16, alpha: 16, dropout: 0, targets: ['q_proj', 'v_proj'] }

/** The main job's model as compute/warmstart.ts `startingPolicy` builds it (its BPE fills the 1,024 ids). */
function mainConfig(): ModelConfig {
  const m = CPU_SOKOBAN.model
  return {
    family: 'llama',
    vocabSize: m.vocabSize,
    hiddenSize: m.hiddenSize,
    intermediateSize: m.intermediateSize,
    numLayers: m.numLayers,
    numHeads: m.numHeads,
    numKvHeads: m.numKvHeads,
    headDim: m.headDim,
    rmsNormEps: 1e-5,
    ropeTheta: 10000,
    maxPositions: m.maxPositions,
    qkvBias: false,
    tieEmbeddings: true,
    learnedPositions: true,
  }
}

export const TRAFFIC_MODELS: Record<string, TrafficModel> = {
  main: {
    name: 'main job (cpu-sokoban built-in model)',
    config: mainConfig(),
    batch: { B: 64, T: 204 },
    note: 'batch 64 × 204 tokens: a rescore batch of compact prompts (~180) + 24-token replies',
  },
  'smollm2-lora': {
    name: 'SmolLM2-135M shape, LoRA r 16 on q_proj, v_proj',
    config: { ...smollm2Config(), maxPositions: 512 },
    lora: SMOLLM2_LORA,
    batch: { B: 2, T: 64 },
    note: 'random weights, 512 positions; batch 2 × 64 tokens (the batch is not what is measured)',
  },
  'smollm2-full': {
    name: 'SmolLM2-135M shape, full fine-tuning',
    config: { ...smollm2Config(), maxPositions: 512 },
    batch: { B: 2, T: 64 },
    note: 'random weights, 512 positions; batch 2 × 64 tokens',
  },
}

/** The weights and (with LoRA) adapters of a model, seeded. */
export function trafficWeights(m: TrafficModel): {
  weights: Map<string, Float32Array>
  adapters?: Map<string, Float32Array>
} {
  const weights = initWeights(m.config, mulberry32(2))
  return m.lora ? { weights, adapters: initLora(m.config, m.lora, mulberry32(3)) } : { weights }
}

/** A tree's policy, as far as the count needs it. */
export interface TrafficPolicy {
  /** The (B, T) train feeds of these items: the tree's token batch plus a `mask` of the scored tokens. */
  trainFeeds(items: Array<{ context: number[]; response: number[] }>): Feeds
  trainModel(): Promise<ModelHandle>
  /** One optimizer step (AdamW, lr 1e-5, clipping at 1, weight decay 0.01). */
  step(train: ModelHandle, feeds: Feeds): Promise<number>
  decodeBatch(options: { rows: number; capacity: number }): {
    admit(specs: Array<{ prompt: number[]; temperature: number; rng: { next(): number } }>): Promise<unknown[]>
    step(): Promise<unknown[]>
    close(): Promise<void>
  }
}

/** Before or after: how a tree makes its worker engine and a policy over it. */
export interface TrafficTree {
  name: 'before' | 'after'
  createWorkerEngine(threads: number): Engine
  policy(
    engine: Engine,
    config: ModelConfig,
    weights: Map<string, Float32Array>,
    lora?: { config: LoraConfig; adapters: Map<string, Float32Array> },
  ): TrafficPolicy
}

/** What crossed into and out of the engine during one part of the count. */
export interface TrafficCount {
  runs: number
  fedBytes: number
  /** Of `fedBytes`: the weights, adapters, AdamW moments and rotary tables (state that a resident trainer keeps). */
  fedStateBytes: number
  fetchedBytes: number
  keptBytes: number
  loadedBytes: number
  readBytes: number
  fedNames: string[]
}

export interface TrafficResult {
  tree: 'before' | 'after'
  model: string
  parameters: number
  trainedParameters: number
  /** Making the policy, loading the train graph and the warm-up step. */
  setup: TrafficCount
  trainStep: TrafficCount
  /** `admit` of DECODE.rows prompts (the prefill; the first one after a train step, so it loads decode sessions). */
  prefill: TrafficCount
  /** The first `step()` after the prefill (it loads the step session). */
  decodeStep: TrafficCount
  /** The `step()` after that: what every further step of the batch sends. */
  nextDecodeStep: TrafficCount
  /** `admit` of the same prompts into a new DecodeBatch after one more train step (sessions already made). */
  prefillAgain: TrafficCount
  seconds: { warmupStep: number; trainStep: number; prefill: number; decodeStep: number; nextDecodeStep: number }
}

/** Bytes of each state tensor a run may feed: weights, adapters, their moments, the rotary tables. */
function stateSizes(m: TrafficModel): Map<string, number> {
  const sizes = new Map<string, number>()
  const trained = m.lora
    ? loraSpecs(m.config, m.lora).flatMap((s) => [s.a, s.b])
    : parameterSpecs(m.config).map((s) => ({ name: s.name, shape: s.shape }))
  for (const s of parameterSpecs(m.config)) sizes.set(s.name, 4 * s.shape.reduce((a, b) => a * b, 1))
  for (const s of trained) {
    const bytes = 4 * s.shape.reduce((a, b) => a * b, 1)
    sizes.set(s.name, bytes)
    for (const moment of [ADAMW_IO.firstMoment(s.name), ADAMW_IO.secondMoment(s.name)]) sizes.set(moment, bytes)
  }
  const rope = 4 * m.config.maxPositions * m.config.headDim
  sizes.set('rope_cos', rope)
  sizes.set('rope_sin', rope)
  return sizes
}

function count(engine: MeteredEngine, sizes: Map<string, number>): TrafficCount {
  const t = engine.traffic
  let fedStateBytes = 0
  for (const [name, runs] of t.fedNames) fedStateBytes += (sizes.get(name) ?? 0) * runs
  return {
    runs: t.runs,
    fedBytes: t.fedBytes,
    fedStateBytes,
    fetchedBytes: t.fetchedBytes,
    keptBytes: t.keptBytes,
    loadedBytes: t.loadedBytes,
    readBytes: t.readBytes,
    fedNames: [...t.fedNames.keys()].sort(),
  }
}

function randomIds(rng: { next(): number }, n: number, vocab: number): number[] {
  return Array.from({ length: n }, () => 3 + Math.floor(rng.next() * (vocab - 3)))
}

/** Counts one train step (after a warm-up step), then a prefill and one decode step, of `model` on `tree`. */
export async function measureTraffic(tree: TrafficTree, key: string): Promise<TrafficResult> {
  const m = TRAFFIC_MODELS[key]
  if (!m) throw new Error(`unknown model ${key}: ${Object.keys(TRAFFIC_MODELS).join(', ')}`)
  const { weights, adapters } = trafficWeights(m)
  const sizes = stateSizes(m)
  const engine = meteredEngine(tree.createWorkerEngine(TRAFFIC_THREADS))
  try {
    const lora = m.lora && adapters ? { config: m.lora, adapters } : undefined
    const policy = tree.policy(engine, m.config, weights, lora)
    const rng = mulberry32(4)
    const items = Array.from({ length: m.batch.B }, () => {
      const ids = randomIds(rng, m.batch.T + 1, m.config.vocabSize)
      return { context: ids.slice(0, 1), response: ids.slice(1) }
    })
    const feeds = policy.trainFeeds(items)
    const train = await policy.trainModel()
    let started = performance.now()
    await policy.step(train, feeds)
    const warmupStep = (performance.now() - started) / 1000
    const setup = count(engine, sizes)
    engine.reset()
    started = performance.now()
    await policy.step(train, feeds)
    const trainSeconds = (performance.now() - started) / 1000
    const trainStep = count(engine, sizes)
    engine.reset()
    const batch = policy.decodeBatch({ rows: DECODE.rows, capacity: DECODE.prompt + DECODE.room })
    const specs = Array.from({ length: DECODE.rows }, (_, i) => ({
      prompt: randomIds(rng, DECODE.prompt, m.config.vocabSize),
      temperature: 1,
      rng: mulberry32(100 + i),
    }))
    started = performance.now()
    await batch.admit(specs)
    const prefillSeconds = (performance.now() - started) / 1000
    const prefill = count(engine, sizes)
    engine.reset()
    started = performance.now()
    await batch.step()
    const decodeSeconds = (performance.now() - started) / 1000
    const decodeStep = count(engine, sizes)
    engine.reset()
    started = performance.now()
    await batch.step()
    const nextSeconds = (performance.now() - started) / 1000
    const nextDecodeStep = count(engine, sizes)
    await batch.close()
    // a new policy version: a tree that keeps decode weights by version sends them again, one that bakes or keeps
    // them where the trainer steps them sends nothing
    await policy.step(train, feeds)
    const again = policy.decodeBatch({ rows: DECODE.rows, capacity: DECODE.prompt + DECODE.room })
    engine.reset()
    await again.admit(specs.map((spec, i) => ({ ...spec, rng: mulberry32(200 + i) })))
    const prefillAgain = count(engine, sizes)
    await again.close()
    const numel = (shape: number[]) => shape.reduce((a, b) => a * b, 1)
    const parameters = parameterSpecs(m.config).reduce((n, s) => n + numel(s.shape), 0)
    const trainedParameters = m.lora
      ? loraSpecs(m.config, m.lora).reduce((n, s) => n + numel(s.a.shape) + numel(s.b.shape), 0)
      : parameters
    return {
      tree: tree.name,
      model: key,
      parameters,
      trainedParameters,
      setup,
      trainStep,
      prefill,
      decodeStep,
      nextDecodeStep,
      prefillAgain,
      seconds: {
        warmupStep,
        trainStep: trainSeconds,
        prefill: prefillSeconds,
        decodeStep: decodeSeconds,
        nextDecodeStep: nextSeconds,
      },
    }
  } finally {
    await engine.close()
  }
}

/** This tree: a Trainer over the worker engine. */
export const AFTER_TREE: TrafficTree = {
  name: 'after',
  createWorkerEngine: (threads) => createWorkerEngine({ threads }),
  policy(engine, config, weights, lora) {
    const trainer = new Trainer(engine, config, weights, lora ? { lora } : {})
    const model = trainer.model
    return {
      trainFeeds: (items) => meanNllFeeds(model, items),
      trainModel: () => trainer.trainModel(meanNll),
      async step(train, feeds) {
        return (await trainer.step(train, feeds, { lr: 1e-5, maxGradNorm: 1, weightDecay: 0.01 })).loss
      },
      decodeBatch: (options) => new DecodeBatch(model, options),
    }
  },
}
