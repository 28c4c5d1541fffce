// The one owner of a policy's trainable state on an engine: the trained tensors (every weight, or LoRA
// adapters over a base baked into the sessions), AdamW's moments and its step count, all kept where the engine
// runs. A step is one run of a train graph with the optimizer inside (engine/adamw-graph.ts) that writes the new
// values into the kept tensors' own memory (RunOptions.inPlace: every read of a weight or moment is an ancestor of
// the guard that writes it, which needs every gradient), so nothing but the batch and a few scalars goes in, nothing
// but scalars comes back, and ORT allocates no second copy of the state. The tensors come back only when asked
// (`trained`, `optimizerState`: checkpoints).
import {
  ADAMW_IO,
  type AdamWGraphConfig,
  type AdamWState,
  adamwScalars,
  type Engine,
  type Feeds,
  type KeptFeeds,
  type ModelHandle,
  OptimizerError,
} from '../engine/index.ts'
import type { ModelConfig } from './config.ts'
import { type LoraConfig, loraSpecs, mergeLora } from './lora.ts'
import { IO, type LossBuilder } from './model.ts'
import { parameterSpecs } from './parameters.ts'
import { type ModelParameters, PolicyModel, type PolicyModelOptions } from './policy-model.ts'

/** LoRA adapters on a model: the config and the A / B tensors by name (policy/lora.ts). */
export interface LoraAdapters {
  config: LoraConfig
  adapters: Map<string, Float32Array>
}

export interface TrainStepResult {
  loss: number
  /** Global gradient norm before clipping. */
  gradNorm: number
  /** Every scalar output of the train graph besides the loss and the optimizer's (diagnostics of the loss builder). */
  outputs: Record<string, number>
  /** The gradients, by trained tensor, when the train graph outputs them (`trainModel`'s `outputGradients`). */
  gradients?: Map<string, Float32Array>
}

export class TrainerError extends Error {
  override name = 'TrainerError'
}

/** A step whose loss or gradient is not finite; weights, moments and the step count are left unchanged. */
export class NonFiniteLossError extends Error {
  override name = 'NonFiniteLossError'
  constructor(
    message: string,
    /** The step's scalar outputs (the loss under `loss`), to name the term that diverged. */
    readonly values: Record<string, number> = {},
  ) {
    super(message)
  }
}

/**
 * One part of a step's batch (gradient accumulation): its feeds and its loss's weight in the step's (≥ 0): shares
 * summing to 1 (`shares`), or 1 each for losses that are already the parts of the batch's. The micro-batches' gradients are summed in the engine before the optimizer
 * runs once on the total: the step of the whole batch up to float32 rounding when the loss is a mean the weights
 * undo (a token mean over the mask, weighted by tokens), with the peak memory of one micro-batch.
 */
export interface MicroBatch {
  feeds: Feeds
  weight: number
}

/** A step's settings: the learning rate, the clipping norm, and weight decay (default 0.01). */
export interface StepSettings {
  lr: number
  maxGradNorm?: number
  weightDecay?: number
  /**
   * How a batch split into micro-batches (`microBatchRows`) weighs them: by their tokens under the `mask` feed
   * (default: a loss that is a token mean over it), by rows (a mean over sequences), or 1 each (`parts`: a loss
   * whose graph is fed the whole batch's totals, so that each micro-batch's is its part of the batch's).
   */
  shares?: 'tokens' | 'rows' | 'parts'
}

/**
 * AdamW's constants and which tensors do not decay (norm scales), baked into the train graphs; PyTorch's
 * defaults. The learning rate and weight decay are a step's (StepSettings).
 */
export const TRAINER_OPTIMIZER: AdamWGraphConfig = {
  beta1: 0.9,
  beta2: 0.999,
  eps: 1e-8,
  noDecay: (name) => name.endsWith('norm.weight'),
}

export interface TrainerOptions extends PolicyModelOptions {
  lora?: LoraAdapters
  /**
   * A step over a batch of more rows than this runs as micro-batches of at most this many (gradient accumulation,
   * `splitRows`): the same step up to float32 rounding, with the peak memory of one micro-batch.
   */
  microBatchRows?: number
}

export class Trainer implements ModelParameters {
  readonly model: PolicyModel
  readonly microBatchRows: number | undefined
  readonly base: ReadonlyMap<string, Float32Array>
  readonly lora?: LoraConfig
  readonly #engine: Engine
  readonly #config: ModelConfig
  readonly #specs: ReadonlyArray<{ name: string; shape: number[] }>
  #trained: Promise<KeptFeeds>
  #moments?: Promise<KeptFeeds>
  #step = 0
  #version = 0
  /**
   * Per train model (by id): the handle trainModel gave and its micro-batch graphs, loaded on first use. A model
   * whose sessions were released hands out a new handle when loaded again, and its micro-batch graphs are loaded
   * again with it.
   */
  readonly #accumulating = new Map<
    string,
    { train: ModelHandle; graphs: () => Promise<{ sum: ModelHandle; apply: ModelHandle }> }
  >()

  /**
   * Keeps `weights` in the engine as the trained tensors, or with `lora` bakes them into the sessions as the
   * base and keeps the adapters. The arrays given are not changed: the engine keeps copies, which steps write.
   */
  constructor(engine: Engine, config: ModelConfig, weights: Map<string, Float32Array>, options: TrainerOptions = {}) {
    this.#engine = engine
    this.#config = config
    const { lora, microBatchRows, ...layout } = options
    if (microBatchRows !== undefined && !(Number.isInteger(microBatchRows) && microBatchRows >= 1))
      throw new TrainerError(`microBatchRows must be a positive integer, got ${microBatchRows}`)
    this.microBatchRows = microBatchRows
    this.lora = lora?.config
    this.base = lora ? weights : new Map()
    this.model = new PolicyModel(engine, config, this, layout)
    this.#specs = lora ? loraSpecs(config, lora.config).flatMap((s) => [s.a, s.b]) : parameterSpecs(config)
    this.#trained = this.#keep(lora ? lora.adapters : weights)
  }

  get engine(): Engine {
    return this.#engine
  }

  get config(): ModelConfig {
    return this.#config
  }

  /** Steps taken by the optimizer (AdamW's t). */
  get stepCount(): number {
    return this.#step
  }

  get version(): number {
    return this.#version
  }

  /** The trained tensors' names and shapes, in graph input order. */
  trainedSpecs(): ReadonlyArray<{ name: string; shape: number[] }> {
    return this.#specs
  }

  kept(): Promise<KeptFeeds> {
    return this.#trained
  }

  async trained(): Promise<Map<string, Float32Array>> {
    const read = await this.#engine.read(await this.#trained)
    return new Map(this.#specs.map((s) => [s.name, float32(read[s.name]?.data as Float32Array | Float64Array)]))
  }

  /** Replaces the trained tensors (a kept best snapshot); the moments and the step count stay. */
  async setTrained(values: ReadonlyMap<string, Float32Array>): Promise<void> {
    const old = this.#trained
    this.#trained = this.#keep(values)
    await this.#trained
    this.#version++
    await this.#engine.forget(await old)
  }

  /** The weights of the policy as it is now: the trained ones, or the base with the adapters merged. */
  async mergedWeights(): Promise<Map<string, Float32Array>> {
    const trained = await this.trained()
    if (!this.lora) return trained
    return mergeLora(this.base as Map<string, Float32Array>, trained, this.#config, this.lora)
  }

  /**
   * The train graph of `lossBuilder` with this trainer's optimizer inside (one session per loss form);
   * `outputGradients`: a step returns the gradients too (TrainStepResult.gradients).
   */
  async trainModel(lossBuilder: LossBuilder, options: { outputGradients?: boolean } = {}): Promise<ModelHandle> {
    const optimizer = { ...TRAINER_OPTIMIZER, ...options }
    const train = await this.model.trainModel(lossBuilder, optimizer)
    // the micro-batch graphs of the same loss, loaded when a step first has micro-batches (again after a release)
    if (this.#accumulating.get(train.id)?.train !== train) {
      let graphs: Promise<{ sum: ModelHandle; apply: ModelHandle }> | undefined
      this.#accumulating.set(train.id, {
        train,
        graphs: () => {
          graphs ??= Promise.all([
            this.model.trainModel(lossBuilder, optimizer, 'sum'),
            this.model.trainModel(lossBuilder, optimizer, 'apply'),
          ]).then(([sum, apply]) => ({ sum, apply }))
          return graphs
        },
      })
    }
    return train
  }

  /**
   * One optimizer step: a single run computes the loss, the gradients, the global norm, clipping and AdamW and
   * writes the new trained tensors and moments into their memory where the engine keeps them. A
   * non-finite loss or gradient norm changes nothing (the graph's guard) and throws NonFiniteLossError.
   */
  async step(
    train: ModelHandle,
    batch: Feeds | readonly MicroBatch[],
    settings: StepSettings,
  ): Promise<TrainStepResult> {
    const micro = Array.isArray(batch)
      ? checkedMicroBatches(batch)
      : splitRows(batch as Feeds, this.microBatchRows, settings.shares ?? 'tokens')
    if (micro.length === 1) return this.#apply(train, (micro[0] as MicroBatch).feeds, settings)
    const accumulating = this.#accumulating.get(train.id)
    if (accumulating?.train !== train)
      throw new TrainerError('a step over micro-batches needs the train model this trainer last made (trainModel)')
    const { sum, apply } = await accumulating.graphs()
    const shapes: Record<string, { dtype: 'float32' | 'float64'; dims: number[] }> = {}
    for (const { name, shape } of this.#specs)
      shapes[ADAMW_IO.gradientSum(name)] = { dtype: this.model.dtype, dims: shape }
    const sums = await this.#engine.allocate(shapes)
    try {
      const inPlace: Record<string, string> = {}
      for (const { name } of this.#specs)
        inPlace[ADAMW_IO.next(ADAMW_IO.gradientSum(name))] = ADAMW_IO.gradientSum(name)
      const weighted: Record<string, number> = {}
      const add = (values: Record<string, number>, weight: number) => {
        for (const [name, v] of Object.entries(values)) weighted[name] = (weighted[name] ?? 0) + weight * v
      }
      for (const { feeds, weight } of micro.slice(0, -1)) {
        const out = await this.#engine.run(
          sum,
          { ...feeds, [ADAMW_IO.lossScale]: this.model.float([], [weight]) },
          {
            kept: [await this.#trained, sums],
            fetches: sum.outputNames.filter((n) => n !== IO.tokenLogprobs),
            inPlace,
          },
        )
        const values = scalarsOf(out)
        // nothing has changed yet: the sums are dropped below
        if (!Number.isFinite(values[IO.loss]))
          throw new NonFiniteLossError(`train step: loss is ${values[IO.loss]}; weights left unchanged`, values)
        add(values, weight)
      }
      const last = micro.at(-1) as MicroBatch
      const result = await this.#apply(
        apply,
        { ...last.feeds, [ADAMW_IO.lossScale]: this.model.float([], [last.weight]) },
        settings,
        sums,
        (values) => {
          add(values, last.weight)
          return weighted
        },
      )
      return result
    } finally {
      await this.#engine.forget(sums)
    }
  }

  /**
   * The optimizer's run: the whole batch, or the last micro-batch over `sums` (then `combine` turns its scalar
   * outputs into the step's, weighted over the micro-batches).
   */
  async #apply(
    train: ModelHandle,
    feeds: Feeds,
    settings: StepSettings,
    sums?: KeptFeeds,
    combine: (values: Record<string, number>) => Record<string, number> = (values) => values,
  ): Promise<TrainStepResult> {
    const maxGradNorm = settings.maxGradNorm ?? 1
    const scalars = adamwScalars(this.#step + 1, settings.lr, {
      beta1: TRAINER_OPTIMIZER.beta1,
      beta2: TRAINER_OPTIMIZER.beta2,
      weightDecay: settings.weightDecay ?? 0.01,
      maxGradNorm,
    })
    const all: Feeds = { ...feeds }
    for (const [name, value] of Object.entries(scalars)) all[name] = this.model.float([], [value])
    const inPlace: Record<string, string> = {}
    for (const { name } of this.#specs)
      for (const n of [name, ADAMW_IO.firstMoment(name), ADAMW_IO.secondMoment(name)]) inPlace[ADAMW_IO.next(n)] = n
    const fetches = train.outputNames.filter((n) => n !== IO.tokenLogprobs)
    const out = await this.#engine.run(train, all, {
      kept: [await this.#trained, await this.#momentsKept(), ...(sums ? [sums] : [])],
      fetches,
      inPlace,
    })
    const gradNorm = Number(out[ADAMW_IO.gradNorm]?.data[0])
    const finite = Number(out[ADAMW_IO.finite]?.data[0]) === 1
    const { [IO.loss]: loss = Number.NaN, ...outputs } = combine(scalarsOf(out))
    if (!Number.isFinite(loss))
      throw new NonFiniteLossError(`train step: loss is ${loss}; weights left unchanged`, { ...outputs, loss })
    if (!finite || !Number.isFinite(gradNorm))
      throw new NonFiniteLossError(`train step: gradient norm is ${gradNorm} (loss ${loss}); weights left unchanged`, {
        ...outputs,
        loss,
        gradNorm,
      })
    this.#step++
    this.#version++
    const gradients = this.#specs.flatMap(({ name }) => {
      const g = out[ADAMW_IO.gradient(name)]
      return g ? [[name, float32(g.data as Float32Array | Float64Array)] as const] : []
    })
    return { loss, gradNorm, outputs, ...(gradients.length > 0 ? { gradients: new Map(gradients) } : {}) }
  }

  /** AdamW's state as a checkpoint stores it (copies of the moments; none before the first step of a fresh state). */
  async optimizerState(): Promise<AdamWState> {
    if (!this.#moments) return { step: this.#step, tensors: {} }
    const read = await this.#engine.read(await this.#moments)
    const tensors: AdamWState['tensors'] = {}
    for (const [name, t] of Object.entries(read)) tensors[name] = float32(t.data as Float32Array | Float64Array)
    return { step: this.#step, tensors }
  }

  /**
   * Starts the optimizer from a stored state (the moments of every trained tensor, or none: zeros), or afresh
   * without one. A state whose tensors are not this trainer's is refused.
   */
  async loadOptimizerState(state?: AdamWState): Promise<void> {
    if (state && (!Number.isInteger(state.step) || state.step < 0))
      throw new OptimizerError(`AdamW state: bad step ${state.step}`)
    const tensors = state?.tensors ?? {}
    const expected = new Map<string, number>()
    for (const { name, shape } of this.#specs) {
      const n = shape.reduce((a, b) => a * b, 1)
      expected.set(ADAMW_IO.firstMoment(name), n)
      expected.set(ADAMW_IO.secondMoment(name), n)
    }
    const names = Object.keys(tensors)
    if (names.length > 0) {
      const unexpected = names.filter((n) => !expected.has(n))
      if (unexpected.length > 0) throw new OptimizerError(`AdamW state: unexpected tensor ${unexpected[0]}`)
      for (const [name, n] of expected) {
        const t = tensors[name]
        if (!t) throw new OptimizerError(`AdamW state: no ${name}`)
        if (t.length !== n) throw new OptimizerError(`AdamW state: ${name} has ${t.length} elements, expected ${n}`)
      }
    }
    const old = this.#moments
    // no moments stored: zeros, made in the engine at the next step (nothing held until then)
    this.#moments = names.length > 0 ? this.#keepMoments(tensors) : undefined
    await this.#moments
    this.#step = state?.step ?? 0
    if (old) await this.#engine.forget(await old)
  }

  /** Frees what the engine keeps for this trainer and the sessions of its model. */
  async release(): Promise<void> {
    await this.model.release()
    const held = [this.#trained, this.#moments]
    this.#moments = undefined
    await Promise.all(held.map(async (h) => (h ? this.#engine.forget(await h).catch(() => undefined) : undefined)))
  }

  #momentsKept(): Promise<KeptFeeds> {
    this.#moments ??= this.#zeroMoments()
    return this.#moments
  }

  #zeroMoments(): Promise<KeptFeeds> {
    const shapes: Record<string, { dtype: 'float32' | 'float64'; dims: number[] }> = {}
    for (const { name, shape } of this.#specs)
      for (const n of [ADAMW_IO.firstMoment(name), ADAMW_IO.secondMoment(name)])
        shapes[n] = { dtype: this.model.dtype, dims: shape }
    return this.#engine.allocate(shapes)
  }

  #keepMoments(tensors: AdamWState['tensors']): Promise<KeptFeeds> {
    const feeds: Feeds = {}
    for (const { name, shape } of this.#specs)
      for (const n of [ADAMW_IO.firstMoment(name), ADAMW_IO.secondMoment(name)])
        feeds[n] = this.model.float(shape, (tensors[n] as Float32Array | Float64Array).slice())
    return this.#engine.keep(feeds)
  }

  #keep(values: ReadonlyMap<string, Float32Array>): Promise<KeptFeeds> {
    const feeds: Feeds = {}
    for (const { name, shape } of this.#specs) {
      const w = values.get(name)
      if (!w) throw new TrainerError(`${this.lora ? 'adapter tensor' : 'weight'} ${name} is missing`)
      // a copy: a step writes into what the engine keeps, and a local engine keeps the arrays it is given
      feeds[name] = this.model.float(shape, this.model.dtype === 'float32' ? w.slice() : w)
    }
    return this.#engine.keep(feeds)
  }
}

/** The scalar outputs of a step's run but the optimizer's own (gradient norm, finiteness): the loss and diagnostics. */
function scalarsOf(out: Feeds): Record<string, number> {
  const values: Record<string, number> = {}
  for (const [name, t] of Object.entries(out))
    if (t.dims.length === 0 && name !== ADAMW_IO.gradNorm && name !== ADAMW_IO.finite) values[name] = Number(t.data[0])
  return values
}

function checkedMicroBatches(batch: readonly MicroBatch[]): readonly MicroBatch[] {
  if (batch.length === 0) throw new TrainerError('a step needs at least one micro-batch')
  if (!batch.every((m) => Number.isFinite(m.weight) && m.weight >= 0))
    throw new TrainerError(`micro-batch weights must be finite and ≥ 0, got ${batch.map((m) => m.weight).join(', ')}`)
  return batch
}

/**
 * Micro-batch weights: each one's share of the total of `sizes` (its tokens under the loss's mask for a token
 * mean, its rows for a mean over sequences), so that the weighted micro-batch losses sum to the batch's loss.
 */
export function shares(sizes: readonly number[]): number[] {
  const total = sizes.reduce((a, b) => a + b, 0)
  return sizes.map((n) => (total > 0 ? n / total : 1 / sizes.length))
}

/**
 * A batch's feeds as micro-batches of at most `rows` rows: every feed whose first axis is the batch's (IO.ids') is
 * cut along it (views, nothing copied), the others (scalars) go to each. One micro-batch when `rows` is absent or
 * the batch fits.
 */
export function splitRows(
  feeds: Feeds,
  rows: number | undefined,
  by: 'tokens' | 'rows' | 'parts' = 'tokens',
): MicroBatch[] {
  const B = feeds[IO.ids]?.dims[0]
  if (rows === undefined || B === undefined || B <= rows) return [{ feeds, weight: 1 }]
  const parts: Feeds[] = []
  for (let from = 0; from < B; from += rows) {
    const to = Math.min(B, from + rows)
    const part: Feeds = {}
    for (const [name, t] of Object.entries(feeds)) {
      if (t.dims[0] !== B || t.dims.length === 0) {
        part[name] = t
        continue
      }
      const row = t.dims.slice(1).reduce((a, b) => a * b, 1)
      part[name] = { ...t, dims: [to - from, ...t.dims.slice(1)], data: t.data.subarray(from * row, to * row) }
    }
    parts.push(part)
  }
  const size = (part: Feeds) => {
    const mask = part.mask?.data as ArrayLike<number> | undefined
    if (by === 'rows' || !mask) return part[IO.ids]?.dims[0] ?? 0
    let n = 0
    for (let i = 0; i < mask.length; i++) n += mask[i] as number
    return n
  }
  const weights = by === 'parts' ? parts.map(() => 1) : shares(parts.map(size))
  return parts.map((p, i) => ({ feeds: p, weight: weights[i] as number }))
}

function float32(data: Float32Array | Float64Array): Float32Array {
  return data instanceof Float32Array ? data : Float32Array.from(data)
}

/**
 * A model for inference over these weights (a trainer that is never stepped), for scripts and tests: the weights it
 * keeps go with the engine. A long-lived process holds the Trainer instead, and releases it (`trainer.release()`).
 */
export function policyModel(
  engine: Engine,
  config: ModelConfig,
  weights: Map<string, Float32Array>,
  options: PolicyModelOptions & { lora?: LoraAdapters } = {},
): PolicyModel {
  return new Trainer(engine, config, weights, options).model
}
