import { tmpdir } from 'node:os'
import {
  type AdamWGraphConfig,
  type ConstTensor,
  type Engine,
  encodeModel,
  type Feeds,
  type Graph,
  type KeptFeeds,
  type ModelHandle,
  modelId,
  type TensorData,
  tensor,
  writeModelFiles,
} from '../engine/index.ts'
import type { ModelConfig } from './config.ts'
import type { LoraConfig } from './lora.ts'
import {
  type Accumulation,
  buildDecodeGraph,
  buildForwardGraph,
  buildScoreGraph,
  buildTrainGraph,
  type DecodeSampling,
  type FloatType,
  type GraphOptions,
  IO,
  type LossBuilder,
} from './model.ts'
import { ropeTables } from './rope.ts'

/** One scored sequence: the response's tokens are scored given the context before them. */
export interface ScoreItem {
  context: readonly number[]
  response: readonly number[]
}

export interface ScoredItem {
  /** log π(response[i] | context, response[<i]), one per response token. */
  logprobs: Float64Array
  entropy: Float64Array
}

/** A right-padded batch of (context + response) sequences, targets shifted by one. */
export interface TokenBatch {
  B: number
  T: number
  /** The batch's own inputs (the parameters come from where the engine keeps them). */
  feeds: Feeds
  /** 1 where the target is a response token, else 0. (B, T) */
  responseMask: Float64Array
  /** Position of each item's first response target (= context length − 1). */
  offsets: number[]
  lengths: number[]
}

/** Decode with the trained tensors fed from where the engine keeps them, or baked into pre-packed sessions. */
export type DecodeWeights = 'inputs' | 'frozen'

/** How a model's graphs are laid out and run; none changes what they compute beyond float32 rounding. */
export interface PolicyModelOptions {
  dtype?: FloatType
  graph?: GraphOptions
  /** The decode weights of a decode batch that names none (default `inputs`). */
  decodeWeights?: DecodeWeights
  /**
   * Weights baked into a session beyond this many bytes go to a data file beside the model (ONNX external data,
   * written under the OS's temporary folder and removed once loaded): protobuf caps a model at 2 GB. Default
   * 1.5 GiB.
   */
  externalDataBytes?: number
}

const EXTERNAL_DATA_BYTES = 1.5 * 2 ** 30

/**
 * Where a model's graphs get their parameters (policy/trainer.ts owns them): the trained tensors kept in the
 * engine, and the weights that never change baked into every session.
 */
export interface ModelParameters {
  /** The trained tensors (every weight, or the LoRA adapters), kept in the engine; a step writes them there. */
  kept(): Promise<KeptFeeds>
  /** Copies of the trained tensors as they are now (float32). */
  trained(): Promise<Map<string, Float32Array>>
  /** The trained tensors' names and shapes, in graph input order. */
  trainedSpecs(): ReadonlyArray<{ name: string; shape: number[] }>
  /** Weights baked into every session as initializers: a LoRA policy's base; empty for full fine-tuning. */
  readonly base: ReadonlyMap<string, Float32Array>
  /** LoRA adapters' configuration, when the trained tensors are adapters over `base`. */
  readonly lora?: LoraConfig
  /** Changes with every step that changed the trained tensors (frozen decode sessions are keyed by it). */
  readonly version: number
}

/**
 * A policy model's graphs over an engine: the decode, score, forward and train graphs of one configuration
 * and layout, each loaded once into a session that has the rotary tables and the frozen base (with LoRA)
 * baked in, and fed the trained tensors from where the engine keeps them. It owns no weights: its
 * `parameters` (a Trainer) do.
 */
export class PolicyModel {
  readonly config: ModelConfig
  readonly dtype: FloatType
  /** Layout of the score and train graphs (logit chunks, layer recomputation). */
  readonly graphOptions: GraphOptions
  readonly decodeWeights: DecodeWeights
  readonly parameters: ModelParameters
  readonly #externalDataBytes: number
  readonly #engine: Engine
  readonly #rope: { cos: TensorData; sin: TensorData }
  /** Sessions by graph key; those that bake the trained tensors (frozen decode) are keyed by version too. */
  #sessions = new Map<string, Promise<ModelHandle>>()
  #frozenVersion = -1

  constructor(engine: Engine, config: ModelConfig, parameters: ModelParameters, options: PolicyModelOptions = {}) {
    this.#engine = engine
    this.config = config
    this.parameters = parameters
    this.dtype = options.dtype ?? 'float32'
    this.graphOptions = options.graph ?? {}
    this.decodeWeights = options.decodeWeights ?? 'inputs'
    this.#externalDataBytes = options.externalDataBytes ?? EXTERNAL_DATA_BYTES
    const { cos, sin } = ropeTables(config, config.maxPositions)
    this.#rope = {
      cos: this.float([config.maxPositions, config.headDim], cos),
      sin: this.float([config.maxPositions, config.headDim], sin),
    }
  }

  get engine(): Engine {
    return this.#engine
  }

  get lora(): LoraConfig | undefined {
    return this.parameters.lora
  }

  /** This model's layout options (for a model of the same layout over other parameters). */
  options(): PolicyModelOptions {
    return {
      dtype: this.dtype,
      graph: this.graphOptions,
      decodeWeights: this.decodeWeights,
      externalDataBytes: this.#externalDataBytes,
    }
  }

  /**
   * The decode graph for steps over a cache, or (`prefill`) for a prompt with an empty cache. `frozen`: the
   * trained tensors as they are now baked in too, so ORT pre-packs every weight matrix once at load instead
   * of packing it in every MatMul of every run; such a session is of one version of the parameters, and a
   * call after a step loads a new one and releases the old.
   */
  decodeSession(sampling: DecodeSampling, prefill: boolean, frozen = false): Promise<ModelHandle> {
    const lora = this.lora ? { lora: this.lora } : {}
    const build = () => buildDecodeGraph(this.config, this.dtype, sampling, { prefill, ...lora })
    if (!frozen) return this.#session(`decode/${sampling}/${prefill}`, build)
    if (this.parameters.version !== this.#frozenVersion) {
      this.#frozenVersion = this.parameters.version
      for (const [key, handle] of this.#sessions)
        if (key.startsWith('frozen/')) {
          this.#sessions.delete(key)
          void handle.then((m) => this.#engine.release(m)).catch(() => undefined)
        }
    }
    const key = `frozen/${sampling}/${prefill}`
    let handle = this.#sessions.get(key)
    if (!handle) {
      handle = this.parameters.trained().then((trained) => this.#loadBaked(build(), trained))
      this.#sessions.set(key, handle)
    }
    return handle
  }

  /** What a decode run is fed besides its own inputs: the kept trained tensors (none when `frozen`). */
  async decodeFeeds(frozen = false): Promise<KeptFeeds[]> {
    return frozen ? [] : [await this.parameters.kept()]
  }

  scoreModel(): Promise<ModelHandle> {
    return this.#session('score', () => buildScoreGraph(this.config, this.dtype, this.#layout()))
  }

  forwardModel(): Promise<ModelHandle> {
    return this.#session('forward', () => buildForwardGraph(this.config, this.dtype, this.lora))
  }

  /**
   * The train graph of `lossBuilder` with the optimizer inside (`optimizer`: engine/adamw-graph.ts), or one of
   * its micro-batch graphs (`accumulation`). Sessions are shared by graph: a loss builder made again for the next
   * phase finds the session of the last.
   */
  trainModel(lossBuilder: LossBuilder, optimizer: AdamWGraphConfig, accumulation?: Accumulation): Promise<ModelHandle> {
    return this.#graphSession(
      accumulation ? `train-${accumulation}` : 'train',
      buildTrainGraph(this.config, lossBuilder, this.dtype, this.#layout(), optimizer, accumulation),
    )
  }

  /**
   * The train graph of `lossBuilder` without an optimizer: one run returns the loss and `<name>_grad` of every
   * trained tensor, which are its inputs (fed, or kept: `parameters.kept()`). For gradient checks and analysis.
   */
  gradientModel(lossBuilder: LossBuilder): Promise<ModelHandle> {
    return this.#graphSession('gradients', buildTrainGraph(this.config, lossBuilder, this.dtype, this.#layout()))
  }

  /** The trained tensors as feeds in the model's dtype (copies): for a graph run fed by hand (gradient checks). */
  async trainedFeeds(): Promise<Feeds> {
    const trained = await this.parameters.trained()
    const feeds: Feeds = {}
    for (const { name, shape } of this.parameters.trainedSpecs())
      feeds[name] = this.float(shape, trained.get(name) as Float32Array)
    return feeds
  }

  /** Raw logits (length × V, row-major) of each sequence, from one full forward pass. */
  async logits(sequences: readonly (readonly number[])[]): Promise<Float64Array[]> {
    const batch = this.tokenBatch(
      sequences.map((s) => ({ context: s, response: [] })),
      1,
    )
    const { [IO.targets]: _targets, [IO.invTemperature]: _inv, ...feeds } = batch.feeds
    const out = await this.#engine.run(await this.forwardModel(), feeds, { kept: await this.parameters.kept() })
    const logits = out[IO.logits]?.data as Float32Array | Float64Array
    const V = this.config.vocabSize
    return sequences.map((s, b) => Float64Array.from(logits.subarray(b * batch.T * V, (b * batch.T + s.length) * V)))
  }

  /**
   * Releases every session this model loaded (they hold the baked weights and ORT's arenas); the model stays
   * usable and loads them again on demand.
   */
  async release(): Promise<void> {
    const handles = [...this.#sessions.values()]
    this.#sessions.clear()
    await Promise.all(
      handles.map(async (h) => {
        try {
          await this.#engine.release(await h)
        } catch {
          // a graph that failed to load holds nothing
        }
      }),
    )
  }

  /** Packs items into one right-padded batch with shifted targets. */
  tokenBatch(items: readonly ScoreItem[], temperature: number): TokenBatch {
    const B = items.length
    const lengths = items.map((it) => it.context.length + it.response.length)
    const T = Math.max(1, ...lengths)
    if (T > this.config.maxPositions)
      throw new RangeError(`sequence of ${T} tokens exceeds ${this.config.maxPositions} positions`)
    const ids = new BigInt64Array(B * T)
    const targets = new BigInt64Array(B * T)
    const positions = new BigInt64Array(B * T)
    const valid = new Float64Array(B * T)
    const responseMask = new Float64Array(B * T)
    const offsets: number[] = []
    items.forEach((item, b) => {
      if (item.context.length === 0) throw new RangeError(`item ${b}: the context must hold at least one token`)
      const seq = [...item.context, ...item.response]
      for (let t = 0; t < seq.length; t++) {
        ids[b * T + t] = BigInt(seq[t] as number)
        positions[b * T + t] = BigInt(t)
        valid[b * T + t] = 1
        if (t + 1 < seq.length) targets[b * T + t] = BigInt(seq[t + 1] as number)
        if (t + 1 >= item.context.length && t + 1 < seq.length) responseMask[b * T + t] = 1
      }
      offsets.push(item.context.length - 1)
    })
    const feeds: Feeds = {
      [IO.ids]: tensor('int64', [B, T], ids),
      [IO.targets]: tensor('int64', [B, T], targets),
      [IO.positions]: tensor('int64', [B, T], positions),
      [IO.valid]: this.float([B, T], valid),
      [IO.invTemperature]: this.float([], [1 / temperature]),
    }
    return { B, T, feeds, responseMask, offsets, lengths }
  }

  /** Per-token log-probs and entropies of each item's response tokens, at `temperature`. */
  async score(items: readonly ScoreItem[], temperature = 1): Promise<ScoredItem[]> {
    const batch = this.tokenBatch(items, temperature)
    const out = await this.#engine.run(await this.scoreModel(), batch.feeds, { kept: await this.parameters.kept() })
    const logp = out[IO.tokenLogprobs]?.data as Float32Array | Float64Array
    const entropy = out[IO.entropy]?.data as Float32Array | Float64Array
    return items.map((item, b) => {
      const from = b * batch.T + (batch.offsets[b] as number)
      const n = item.response.length
      return {
        logprobs: Float64Array.from(logp.subarray(from, from + n)),
        entropy: Float64Array.from(entropy.subarray(from, from + n)),
      }
    })
  }

  /** A float tensor in the model's dtype. */
  float(dims: readonly number[], values: ArrayLike<number>): TensorData {
    if (this.dtype === 'float64')
      return tensor('float64', dims, values instanceof Float64Array ? values : Float64Array.from(values))
    return tensor('float32', dims, values instanceof Float32Array ? values : Float32Array.from(values))
  }

  /** The layout of the score and train graphs, with the adapters where the model has them. */
  #layout(): GraphOptions {
    return this.lora ? { ...this.graphOptions, lora: this.lora } : this.graphOptions
  }

  /** The session of a graph built by the caller, keyed by its bytes: graphs built again find theirs. */
  #graphSession(kind: string, graph: Graph): Promise<ModelHandle> {
    return this.#session(`${kind}/${modelId(encodeModel(graph))}`, () => graph)
  }

  /** The session of `key`, built once with the rotary tables and the base baked in. */
  #session(key: string, build: () => Graph): Promise<ModelHandle> {
    let handle = this.#sessions.get(key)
    if (!handle) {
      handle = this.#loadBaked(build())
      this.#sessions.set(key, handle)
    }
    return handle
  }

  /** Loads `graph` with the rotary tables, the base and `more` (weights by name) as initializers. */
  async #loadBaked(graph: Graph, more?: ReadonlyMap<string, Float32Array>): Promise<ModelHandle> {
    const initializers: Record<string, ConstTensor> = {
      [IO.ropeCos]: this.#rope.cos,
      [IO.ropeSin]: this.#rope.sin,
    }
    const inputs = new Map(graph.inputs.map((v) => [v.name, v]))
    for (const weights of [this.parameters.base, more ?? new Map()])
      for (const [name, w] of weights) {
        const input = inputs.get(name)
        if (!input) continue // a base weight this graph does not read (the lm head of a tied model)
        initializers[name] = this.float(input.shape as number[], w) as ConstTensor
      }
    const bytes = Object.values(initializers).reduce((n, t) => n + t.data.byteLength, 0)
    if (bytes <= this.#externalDataBytes) return this.#engine.load(encodeModel(graph, { initializers }))
    const file = writeModelFiles(graph, initializers, tmpdir())
    try {
      return await this.#engine.load(file)
    } finally {
      file.remove()
    }
  }
}
