import {
  type ConstTensor,
  type Engine,
  encodeModel,
  type Feeds,
  type KeptFeeds,
  type ModelHandle,
  type TensorData,
  tensor,
} from '../engine/index.ts'
import type { ModelConfig } from './config.ts'
import { buildFusedDecodeGraph, FUSED_DOMAINS } from './decode-graph.ts'
import { type LoraConfig, loraSpecs, mergeLora } from './lora.ts'
import {
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
import { parameterSpecs } from './parameters.ts'
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
  feeds: Feeds
  /** 1 where the target is a response token, else 0. (B, T) */
  responseMask: Float64Array
  /** Position of each item's first response target (= context length − 1). */
  offsets: number[]
  lengths: number[]
}

/** LoRA adapters on a model: the config and the A / B tensors by name (policy/lora.ts). */
export interface LoraAdapters {
  config: LoraConfig
  adapters: Map<string, Float32Array>
}

/**
 * A policy model over an engine: weights (Hugging Face names, float32 in memory), the rotary tables, and the
 * three graph kinds loaded on demand. Runs on whatever thread owns the engine. With LoRA adapters, `weights`
 * are the frozen base and every graph (decode, score, forward, train) adds the adapters' path, so rollout,
 * rescore and update compute the same policy; training updates the adapters only.
 */
/** Decode with the weights fed to every run, or baked into pre-packed sessions (DecodeBatchOptions.weights). */
export type DecodeWeights = 'inputs' | 'frozen'

/** How a model's graphs are laid out and run; none changes what they compute beyond float32 rounding. */
export interface PolicyModelOptions {
  dtype?: FloatType
  graph?: GraphOptions
  /** The decode weights of a decode batch that names none (default `inputs`). */
  decodeWeights?: DecodeWeights
}

export class PolicyModel {
  readonly config: ModelConfig
  readonly dtype: FloatType
  /** Layout of the score and train graphs (logit chunks, layer recomputation). */
  readonly graphOptions: GraphOptions
  readonly decodeWeights: DecodeWeights
  weights: Map<string, Float32Array>
  readonly lora?: LoraAdapters
  readonly #engine: Engine
  readonly #rope: { cos: TensorData; sin: TensorData }
  #decode = new Map<string, Promise<ModelHandle>>()
  #frozen = new Map<string, Promise<ModelHandle>>()
  #frozenPrint?: string
  #score?: Promise<ModelHandle>
  #forward?: Promise<ModelHandle>
  /** The decode feeds kept in the engine, by which weights they copy (see `decodeFeeds`). */
  #kept = new Map<boolean, { print: string; handle: Promise<KeptFeeds> }>()
  /** Every graph this model loaded (the cached ones and train graphs), for `release`. */
  readonly #loaded = new Set<Promise<ModelHandle>>()

  constructor(
    engine: Engine,
    config: ModelConfig,
    weights: Map<string, Float32Array>,
    options: PolicyModelOptions & { lora?: LoraAdapters } = {},
  ) {
    this.#engine = engine
    this.config = config
    this.dtype = options.dtype ?? 'float32'
    this.graphOptions = options.graph ?? {}
    this.decodeWeights = options.decodeWeights ?? 'inputs'
    this.weights = weights
    if (options.lora) this.lora = options.lora
    const { cos, sin } = ropeTables(config, config.maxPositions)
    this.#rope = {
      cos: this.#float([config.maxPositions, config.headDim], cos),
      sin: this.#float([config.maxPositions, config.headDim], sin),
    }
  }

  get engine(): Engine {
    return this.#engine
  }

  /** Feeds for every weight, every adapter tensor and the rotary tables. */
  baseFeeds(): Feeds {
    const feeds: Feeds = { [IO.ropeCos]: this.#rope.cos, [IO.ropeSin]: this.#rope.sin }
    for (const spec of parameterSpecs(this.config)) {
      const w = this.weights.get(spec.name)
      if (!w) throw new Error(`weight ${spec.name} is missing`)
      feeds[spec.name] = this.#float(spec.shape, w)
    }
    for (const { name, shape } of this.lora ? this.trainableSpecs() : []) {
      const t = this.lora?.adapters.get(name)
      if (!t) throw new Error(`adapter tensor ${name} is missing`)
      feeds[name] = this.#float(shape, t)
    }
    return feeds
  }

  /** The tensors a train step updates: every weight, or with LoRA the adapters only (graph input order). */
  trainableSpecs(): Array<{ name: string; shape: number[] }> {
    if (!this.lora) return parameterSpecs(this.config)
    return loraSpecs(this.config, this.lora.config).flatMap((s) => [s.a, s.b])
  }

  /** The tensors a train step updates, by name (the arrays themselves: AdamW updates them in place). */
  trainable(): Map<string, Float32Array> {
    return this.lora ? this.lora.adapters : this.weights
  }

  /** This model's layout options (for a copy of it with other weights or adapters). */
  options(): PolicyModelOptions {
    return { dtype: this.dtype, graph: this.graphOptions, decodeWeights: this.decodeWeights }
  }

  /** The weights with the adapters merged in (W + (alpha / r)·B·A), for export and serving; `weights` without. */
  mergedWeights(): Map<string, Float32Array> {
    return this.lora ? mergeLora(this.weights, this.lora.adapters, this.config, this.lora.config) : this.weights
  }

  /** The decode graph for steps over a cache, or (`prefill`) for a prompt with an empty cache. */
  decodeModel(sampling: DecodeSampling = 'logprobs', prefill = false): Promise<ModelHandle> {
    const key = `${sampling}/${prefill}`
    let handle = this.#decode.get(key)
    if (!handle) {
      const lora = this.lora ? { lora: this.lora.config } : {}
      handle = this.#load(encodeModel(buildDecodeGraph(this.config, this.dtype, sampling, { prefill, ...lora })))
      this.#decode.set(key, handle)
    }
    return handle
  }

  /**
   * A decode graph, `plain` (model.ts) or `fused` (decode-graph.ts, GroupQueryAttention). `frozen`: today's
   * weights baked in as initializers, so ORT pre-packs every weight matrix once at load instead of packing it
   * in every MatMul of every run (weights as inputs); no weight feeds then. A frozen session is tied to a
   * fingerprint of the weights (policy updates change them in place): a call after they changed loads a new
   * one and releases the old ones.
   */
  decodeSession(
    graph: 'plain' | 'fused',
    sampling: DecodeSampling,
    prefill: boolean,
    frozen: boolean,
  ): Promise<ModelHandle> {
    if (!frozen)
      return graph === 'fused' ? this.fusedDecodeModel(sampling, prefill) : this.decodeModel(sampling, prefill)
    const print = this.#trainedPrint()
    if (print !== this.#frozenPrint) {
      const stale = [...this.#frozen.values()]
      this.#frozen.clear()
      this.#frozenPrint = print
      for (const h of stale) {
        this.#loaded.delete(h)
        void h.then((m) => this.#engine.release(m)).catch(() => undefined)
      }
    }
    const key = `${graph}/${sampling}/${prefill}`
    let handle = this.#frozen.get(key)
    if (!handle) {
      const initializers: Record<string, ConstTensor> = {}
      for (const spec of parameterSpecs(this.config)) {
        const w = this.weights.get(spec.name)
        if (!w) throw new Error(`weight ${spec.name} is missing`)
        initializers[spec.name] = { dtype: 'float32', dims: spec.shape, data: w }
      }
      const g =
        graph === 'fused'
          ? buildFusedDecodeGraph(this.config, sampling, { prefill })
          : buildDecodeGraph(this.config, this.dtype, sampling, { prefill })
      handle = this.#load(encodeModel(g, { initializers, ...(graph === 'fused' ? { domains: FUSED_DOMAINS } : {}) }))
      this.#frozen.set(key, handle)
    }
    return handle
  }

  /** Feeds a frozen decode session needs besides the per-run ones: the rotary tables. */
  ropeFeeds(): Feeds {
    return { [IO.ropeCos]: this.#rope.cos, [IO.ropeSin]: this.#rope.sin }
  }

  /**
   * The feeds every decode run shares, kept in the engine so that a step sends only its own inputs: every
   * weight, adapter tensor and rotary table (`baseFeeds`), or with `frozen` (weights baked into the sessions)
   * the rotary tables alone. Kept once per version of the weights: a fingerprint of the weights and adapters
   * (as for frozen sessions) tells when they changed in place, and the stale copy is forgotten.
   */
  decodeFeeds(frozen: boolean): Promise<KeptFeeds> {
    const print = frozen ? 'rope' : this.#trainedPrint()
    const held = this.#kept.get(frozen)
    if (held?.print === print) return held.handle
    if (held) void held.handle.then((k) => this.#engine.forget(k)).catch(() => undefined)
    const handle = this.#engine.keep(frozen ? this.ropeFeeds() : this.baseFeeds())
    this.#kept.set(frozen, { print, handle })
    return handle
  }

  /** Fingerprint of the weights and the adapters (`fingerprint`): tells frozen sessions and kept feeds apart. */
  #trainedPrint(): string {
    const adapters = this.lora ? this.trainableSpecs().map((s) => this.lora?.adapters.get(s.name)) : []
    return fingerprint([...parameterSpecs(this.config).map((s) => this.weights.get(s.name)), ...adapters])
  }

  /** The fused (GroupQueryAttention) decode graph of decode-graph.ts; see `fusedDecodeUnsupported` first. */
  fusedDecodeModel(sampling: DecodeSampling = 'in-graph', prefill = false): Promise<ModelHandle> {
    const key = `fused/${sampling}/${prefill}`
    let handle = this.#decode.get(key)
    if (!handle) {
      const graph = buildFusedDecodeGraph(this.config, sampling, { prefill })
      handle = this.#load(encodeModel(graph, { domains: FUSED_DOMAINS }))
      this.#decode.set(key, handle)
    }
    return handle
  }

  scoreModel(): Promise<ModelHandle> {
    this.#score ??= this.#load(encodeModel(buildScoreGraph(this.config, this.dtype, this.#graphOptions())))
    return this.#score
  }

  forwardModel(): Promise<ModelHandle> {
    this.#forward ??= this.#load(encodeModel(buildForwardGraph(this.config, this.dtype, this.lora?.config)))
    return this.#forward
  }

  /** Raw logits (length × V, row-major) of each sequence, from one full forward pass. */
  async logits(sequences: readonly (readonly number[])[]): Promise<Float64Array[]> {
    const batch = this.tokenBatch(
      sequences.map((s) => ({ context: s, response: [] })),
      1,
    )
    const { [IO.targets]: _targets, [IO.invTemperature]: _inv, ...feeds } = batch.feeds
    const out = await this.#engine.run(await this.forwardModel(), feeds)
    const logits = out[IO.logits]?.data as Float32Array | Float64Array
    const V = this.config.vocabSize
    return sequences.map((s, b) => Float64Array.from(logits.subarray(b * batch.T * V, (b * batch.T + s.length) * V)))
  }

  /** Loads a train graph for `lossBuilder` (the caller keeps the handle: one per loss form). */
  loadTrainModel(lossBuilder: LossBuilder): Promise<ModelHandle> {
    return this.#load(encodeModel(buildTrainGraph(this.config, lossBuilder, this.dtype, this.#graphOptions())))
  }

  #graphOptions(): GraphOptions {
    return this.lora ? { ...this.graphOptions, lora: this.lora.config } : this.graphOptions
  }

  #load(bytes: Uint8Array): Promise<ModelHandle> {
    const handle = this.#engine.load(bytes)
    this.#loaded.add(handle)
    return handle
  }

  /**
   * Releases every graph this model loaded (their ORT sessions hold the memory); the model stays usable and
   * loads graphs again on demand. Long-lived workers call it when a phase is done with a model.
   */
  async release(): Promise<void> {
    const handles = [...this.#loaded]
    const kept = [...this.#kept.values()].map((k) => k.handle)
    this.#loaded.clear()
    this.#kept.clear()
    this.#decode.clear()
    this.#score = undefined
    this.#forward = undefined
    await Promise.all(
      handles.map(async (h) => {
        try {
          await this.#engine.release(await h)
        } catch {
          // a graph that failed to load holds nothing
        }
      }),
    )
    await Promise.all(kept.map(async (k) => this.#engine.forget(await k).catch(() => undefined)))
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
      ...this.baseFeeds(),
      [IO.ids]: tensor('int64', [B, T], ids),
      [IO.targets]: tensor('int64', [B, T], targets),
      [IO.positions]: tensor('int64', [B, T], positions),
      [IO.valid]: this.#float([B, T], valid),
      [IO.invTemperature]: this.#float([], [1 / temperature]),
    }
    return { B, T, feeds, responseMask, offsets, lengths }
  }

  /** Per-token log-probs and entropies of each item's response tokens, at `temperature`. */
  async score(items: readonly ScoreItem[], temperature = 1): Promise<ScoredItem[]> {
    const batch = this.tokenBatch(items, temperature)
    const out = await this.#engine.run(await this.scoreModel(), batch.feeds)
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
    return this.#float(dims, values)
  }

  #float(dims: readonly number[], values: ArrayLike<number>): TensorData {
    if (this.dtype === 'float64')
      return tensor('float64', dims, values instanceof Float64Array ? values : Float64Array.from(values))
    return tensor('float32', dims, values instanceof Float32Array ? values : Float32Array.from(values))
  }
}

/**
 * A cheap fingerprint of tensors: each one's length and 256 of its values spread over it, FNV-1a over their
 * bits. An optimizer step moves (nearly) every value, so neither a frozen session nor kept decode feeds outlive
 * the weights they copy; it is not a content hash (a change confined to values it does not sample goes unseen).
 */
function fingerprint(tensors: readonly (Float32Array | undefined)[]): string {
  let h = 0x811c9dc5
  const mix = (x: number) => {
    h ^= x
    h = Math.imul(h, 0x01000193) >>> 0
  }
  const bits = new Uint32Array(1)
  const f = new Float32Array(bits.buffer)
  for (const w of tensors) {
    if (!w) continue
    mix(w.length)
    const n = Math.min(256, w.length)
    for (let i = 0; i < n; i++) {
      // spread over the tensor, offset by a prime stride so rows and columns both vary
      f[0] = w[(Math.floor((i * w.length) / n) + i * 7919) % w.length] as number
      mix(bits[0] as number)
    }
  }
  return h.toString(16)
}
