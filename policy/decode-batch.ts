// The decode step: a fixed number of rows over a KV cache of fixed capacity. Sequences join free rows (their
// prompts prefilled together), every `step` samples one token for every live row, and a row is released when
// its sequence ends. Rows sit at different positions: each has its own write column and next position, and
// the cache-valid mask hides what a row has not written. `generate`, rollouts, evaluation and serving all
// decode through this one object (docs/design.md §13).
import { type Feeds, type Fetches, type TensorData, tensor } from '../engine/index.ts'
import type { KeptFeeds, KeptWrite } from '../engine/runtime.ts'
import { type DecodeSampling, IO } from './model.ts'
import type { DecodeWeights, PolicyModel } from './policy-model.ts'
import { argmax, sampleFromLogprobs, type TokenChoice, type UniformSource } from './sampling.ts'

/** One sequence to decode: its prompt and how its tokens are drawn. */
export interface SequenceSpec {
  prompt: readonly number[]
  /** > 0: log-probs are those of logits / temperature (greedy decoding reports them too). */
  temperature: number
  /** Argmax instead of a draw; consumes no uniform numbers. */
  greedy?: boolean
  /** Nucleus mass in (0, 1]; below 1 the token is drawn from the (B, V) log-prob row. */
  topP?: number
  /** Also hand back the k most likely tokens of each step's distribution (needs the (B, V) log-prob row). */
  topLogprobs?: number
  /** The sequence's own stream: one uniform per sampled token, so its tokens do not depend on its neighbours. */
  rng: UniformSource
}

/** A token sampled for the sequence in `row`. */
export interface SampledToken extends TokenChoice {
  row: number
  /** The `topLogprobs` most likely tokens, most likely first (ties: lower id first). */
  top?: TokenChoice[]
}

export interface DecodeBatchOptions {
  /** Rows: the most sequences decoded at once. */
  rows: number
  /** Cache slots per row: prompt (padded to its joining group's longest) + new tokens − 1 must fit. */
  capacity: number
  /**
   * Which decode graph a run uses. `in-graph` / `logprobs`: always that one (`in-graph` refuses sequences that
   * need the (B, V) rows). `auto`: in-graph unless a row that samples from the run needs the rows.
   */
  sampling?: DecodeSampling | 'auto'
  /**
   * Steps run over rows [0, highest live row] only, so a step's cost follows the occupancy (rows are handed
   * out lowest first). Off: every step covers all rows, the fixed shapes `generate` has always run.
   */
  compact?: boolean
  /**
   * `frozen`: the trained weights as they are now baked into the decode sessions (pre-packed once by ORT;
   * loaded again after a step, see PolicyModel.decodeSession); more memory and a load per policy version.
   * `inputs` (default: the model's `decodeWeights`, itself `inputs` unless set): the trained weights fed from
   * where the engine keeps them. A LoRA policy's base is baked in either way.
   */
  weights?: DecodeWeights
}

export class DecodeBatchError extends Error {
  override name = 'DecodeBatchError'
}

/** Counters since the batch was made: runs and how many rows they sampled for. */
export interface DecodeBatchStats {
  prefills: number
  prefillTokens: number
  steps: number
  /** Σ over steps of the rows sampled in that step (occupancy). */
  stepRows: number
}

interface Row {
  spec: SequenceSpec
  /** The token sampled last: the next step's input. */
  last: number
  /** Next cache column to write. */
  column: number
  /** Position of the next input token. */
  position: number
}

export class DecodeBatch {
  readonly rows: number
  readonly capacity: number
  readonly stats: DecodeBatchStats = { prefills: 0, prefillTokens: 0, steps: 0, stepRows: 0 }
  readonly #model: PolicyModel
  readonly #sampling: DecodeSampling | 'auto'
  readonly #compact: boolean
  readonly #frozen: boolean
  // The KV cache, kept in the engine (made at the first admit, freed by `close`): runs read it there and write
  // their new keys and values into it, so it never travels between threads: per layer keys (rows, KV, D, S)
  // and values (rows, KV, S, D), rows left-padded to their joining group's longest prompt
  #cache: Promise<KeptFeeds> | undefined
  #closed = false
  readonly #cacheValid: Float64Array // (rows, S)
  readonly #live: (Row | undefined)[]

  constructor(model: PolicyModel, options: DecodeBatchOptions) {
    const c = model.config
    if (!Number.isInteger(options.rows) || options.rows < 1)
      throw new DecodeBatchError(`a decode batch needs at least one row, got ${options.rows}`)
    if (!Number.isInteger(options.capacity) || options.capacity < 1 || options.capacity > c.maxPositions)
      throw new DecodeBatchError(
        `cache capacity ${options.capacity} is outside 1..${c.maxPositions} (the model's positions)`,
      )
    this.#model = model
    this.rows = options.rows
    this.capacity = options.capacity
    this.#sampling = options.sampling ?? 'auto'
    this.#compact = options.compact ?? false
    this.#frozen = (options.weights ?? model.decodeWeights) === 'frozen'
    if (this.#frozen && model.dtype !== 'float32')
      throw new DecodeBatchError(`frozen decode weights are float32 only (this model runs in ${model.dtype})`)
    // the adapters are fed: a frozen session bakes the full weights of one version
    if (this.#frozen && model.lora)
      throw new DecodeBatchError('frozen decode weights: this model has LoRA adapters (its base is baked in already)')
    this.#cacheValid = new Float64Array(this.rows * this.capacity)
    this.#live = Array.from({ length: this.rows }, () => undefined)
  }

  /** Sequences being decoded. */
  get live(): number {
    return this.#live.filter(Boolean).length
  }

  get free(): number {
    return this.rows - this.live
  }

  /** Whether `row` holds a sequence. */
  isLive(row: number): boolean {
    return this.#live[row] !== undefined
  }

  /** How many more tokens the sequence in `row` can take (its first one, from the prefill, already counted). */
  room(row: number): number {
    const r = this.#live[row]
    return r ? this.capacity - r.column + 1 : 0
  }

  /**
   * Admits sequences into the lowest free rows, prefilling their prompts in one run (left-padded to the
   * longest), and samples each one's first token. Returns one token per spec, in spec order.
   */
  async admit(specs: readonly SequenceSpec[]): Promise<SampledToken[]> {
    if (specs.length === 0) return []
    const free = this.#live.flatMap((r, i) => (r ? [] : [i]))
    if (specs.length > free.length)
      throw new DecodeBatchError(`${specs.length} sequences to admit, ${free.length} of ${this.rows} rows free`)
    for (const [i, spec] of specs.entries()) this.#check(spec, i)
    const J = specs.length
    const P = Math.max(...specs.map((s) => s.prompt.length))
    if (P > this.capacity)
      throw new DecodeBatchError(`prompt of ${P} tokens exceeds the cache capacity of ${this.capacity}`)
    const rows = free.slice(0, J)
    const cache = await this.#kv()
    const slices = rows.map((row, j) => ({ from: j, row, at: 0 }))
    const ids = new BigInt64Array(J * P)
    const positions = new BigInt64Array(J * P)
    const valid = new Float64Array(J * P)
    specs.forEach((spec, j) => {
      const pad = P - spec.prompt.length
      spec.prompt.forEach((token, i) => {
        ids[j * P + pad + i] = BigInt(token)
        positions[j * P + pad + i] = BigInt(i)
        valid[j * P + pad + i] = 1
      })
    })
    const sampling = this.#samplingFor(specs)
    // the prompts' keys (J, KV, D, P) and values (J, KV, P, D) go to their rows' slots [0, P)
    const out = await this.#run(true, sampling, specs, { ids, positions, valid, tq: P }, this.#writes(cache, slices))
    const S = this.capacity
    rows.forEach((row, j) => {
      this.#cacheValid.fill(0, row * S, (row + 1) * S)
      this.#cacheValid.set(valid.subarray(j * P, (j + 1) * P), row * S)
    })
    this.stats.prefills++
    this.stats.prefillTokens += specs.reduce((n, s) => n + s.prompt.length, 0)
    return specs.map((spec, j) => {
      const row = rows[j] as number
      const choice = this.#choose(out, sampling, j, spec)
      this.#live[row] = { spec, last: choice.token, column: P, position: spec.prompt.length }
      return { ...choice, row }
    })
  }

  /** Feeds every live row its last token and samples its next one. Returns one token per live row, by row. */
  async step(): Promise<SampledToken[]> {
    const liveRows = this.#live.flatMap((r, i) => (r ? [i] : []))
    if (liveRows.length === 0) return []
    for (const row of liveRows) {
      const r = this.#live[row] as Row
      if (r.column >= this.capacity)
        throw new DecodeBatchError(
          `row ${row} is full: ${this.capacity} cache slots used (prompt ${r.spec.prompt.length}); release it first`,
        )
    }
    const B = this.#compact ? (liveRows[liveRows.length - 1] as number) + 1 : this.rows
    const cache = await this.#kv()
    const ids = new BigInt64Array(B)
    const positions = new BigInt64Array(B)
    const valid = new Float64Array(B)
    const specs: (SequenceSpec | undefined)[] = Array.from({ length: B }, (_, b) => this.#live[b]?.spec)
    for (const row of liveRows) {
      const r = this.#live[row] as Row
      ids[row] = BigInt(r.last)
      positions[row] = BigInt(r.position)
      valid[row] = 1
    }
    const sampling = this.#samplingFor(specs.filter((s): s is SequenceSpec => s !== undefined))
    // each live row's new key (B, KV, D, 1) and value (B, KV, 1, D) go to its next column
    const slices = liveRows.map((row) => ({ from: row, row, at: (this.#live[row] as Row).column }))
    const out = await this.#run(false, sampling, specs, { ids, positions, valid, tq: 1 }, this.#writes(cache, slices), {
      ...cache,
      rows: B,
    })
    const S = this.capacity
    this.stats.steps++
    this.stats.stepRows += liveRows.length
    return liveRows.map((row) => {
      const r = this.#live[row] as Row
      this.#cacheValid[row * S + r.column] = 1
      r.column++
      r.position++
      const choice = this.#choose(out, sampling, row, r.spec)
      r.last = choice.token
      return { ...choice, row }
    })
  }

  /** Frees a row (its sequence ended, or its client went away); the next `admit` may reuse it. */
  release(row: number): void {
    if (!this.#live[row]) throw new DecodeBatchError(`row ${row} holds no sequence`)
    this.#live[row] = undefined
  }

  #check(spec: SequenceSpec, i: number): void {
    if (spec.prompt.length === 0) throw new DecodeBatchError(`sequence ${i}: a prompt needs at least one token`)
    if (!(spec.temperature > 0))
      throw new DecodeBatchError(`sequence ${i}: temperature must be positive, got ${spec.temperature}`)
    const topP = spec.topP ?? 1
    if (!(topP > 0 && topP <= 1)) throw new DecodeBatchError(`sequence ${i}: top-p must be in (0, 1], got ${topP}`)
    const V = this.#model.config.vocabSize
    const k = spec.topLogprobs ?? 0
    if (!Number.isInteger(k) || k < 0 || k > V)
      throw new DecodeBatchError(`sequence ${i}: top log-probs must be an integer in 0..${V}, got ${k}`)
    if (this.#sampling === 'in-graph' && needsRows(spec))
      throw new DecodeBatchError(
        topP < 1
          ? `in-graph sampling draws from the whole distribution; top-p ${topP} needs 'logprobs'`
          : `in-graph sampling returns no log-prob rows; top log-probs need 'logprobs'`,
      )
  }

  #samplingFor(specs: readonly SequenceSpec[]): DecodeSampling {
    if (this.#sampling !== 'auto') return this.#sampling
    return specs.some(needsRows) ? 'logprobs' : 'in-graph'
  }

  /** One run of the prefill (joiners only) or step (rows [0, B)) graph; `specs[b]` samples from row b. */
  async #run(
    prefill: boolean,
    sampling: DecodeSampling,
    specs: readonly (SequenceSpec | undefined)[],
    input: { ids: BigInt64Array; positions: BigInt64Array; valid: Float64Array; tq: number },
    writes: Record<string, KeptWrite>,
    cache?: KeptFeeds,
  ): Promise<Fetches> {
    const model = this.#model
    const B = specs.length
    const S = this.capacity
    const feeds: Feeds = {
      [IO.ids]: tensor('int64', [B, input.tq], input.ids),
      [IO.positions]: tensor('int64', [B, input.tq], input.positions),
      [IO.valid]: model.float([B, input.tq], input.valid),
      [IO.invTemperature]: model.float(
        [B],
        specs.map((s) => 1 / (s?.temperature ?? 1)),
      ),
    }
    // a step reads rows [0, B) of the cache where the engine keeps it, and its valid mask from here
    if (!prefill) feeds[IO.cacheValid] = model.float([B, S], this.#cacheValid.subarray(0, B * S))
    if (sampling === 'in-graph') {
      // one uniform per sequence that samples from this run's output, drawn before the run
      feeds[IO.uniform] = model.float(
        [B],
        specs.map((s) => (s && !s.greedy ? s.rng.next() : 0)),
      )
    }
    const session = await model.decodeSession(sampling, prefill, this.#frozen)
    const parameters = await model.decodeFeeds(this.#frozen)
    return model.engine.run(session, feeds, { kept: cache ? [...parameters, cache] : parameters, writes })
  }

  /**
   * Where a run's new keys and values go in the cache, each layer's at `slices` (see KeptWrite): new_k
   * (B, KV, D, T) along the slots of the transposed keys, new_v (B, KV, T, D) along the slots of the values.
   */
  #writes(cache: KeptFeeds, slices: KeptWrite['slices']): Record<string, KeptWrite> {
    const writes: Record<string, KeptWrite> = {}
    for (let l = 0; l < this.#model.config.numLayers; l++) {
      writes[IO.newK(l)] = { kept: cache, name: IO.cacheK(l), axis: 3, slices }
      writes[IO.newV(l)] = { kept: cache, name: IO.cacheV(l), axis: 2, slices }
    }
    return writes
  }

  /** The KV cache, made in the engine at the first admit (zeros) and kept there until `close`. */
  #kv(): Promise<KeptFeeds> {
    if (this.#closed) throw new DecodeBatchError('this decode batch is closed')
    if (!this.#cache) {
      const c = this.#model.config
      const [KV, D, S] = [c.numKvHeads, c.headDim, this.capacity]
      const dtype = this.#model.dtype
      const shapes: Record<string, { dtype: typeof dtype; dims: number[] }> = {}
      for (let l = 0; l < c.numLayers; l++) {
        shapes[IO.cacheK(l)] = { dtype, dims: [this.rows, KV, D, S] }
        shapes[IO.cacheV(l)] = { dtype, dims: [this.rows, KV, S, D] }
      }
      this.#cache = this.#model.engine.allocate(shapes)
    }
    return this.#cache
  }

  /** Frees the KV cache in the engine; the batch takes no more sequences or steps. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    const cache = this.#cache
    this.#cache = undefined
    if (cache) await this.#model.engine.forget(await cache)
  }

  #choose(
    out: Fetches,
    sampling: DecodeSampling,
    b: number,
    spec: SequenceSpec,
  ): TokenChoice & { top?: TokenChoice[] } {
    if (sampling === 'in-graph') {
      const [token, logprob] = spec.greedy ? [IO.greedyToken, IO.greedyLogprob] : [IO.sampledToken, IO.sampledLogprob]
      return { token: Number(out[token]?.data[b]), logprob: Number(out[logprob]?.data[b]) }
    }
    const V = this.#model.config.vocabSize
    const row = (out[IO.logprobs] as TensorData).data.subarray(b * V, (b + 1) * V) as Float32Array
    const choice = spec.greedy ? argmax(row) : sampleFromLogprobs(row, spec.topP ?? 1, spec.rng)
    return spec.topLogprobs ? { ...choice, top: topK(row, spec.topLogprobs) } : choice
  }
}

function needsRows(spec: SequenceSpec): boolean {
  return (spec.topP ?? 1) < 1 || (spec.topLogprobs ?? 0) > 0
}

/** The k largest entries of a log-prob row, largest first, ties to the lower id. */
export function topK(row: Float32Array, k: number): TokenChoice[] {
  const best: TokenChoice[] = []
  for (let v = 0; v < row.length; v++) {
    const lp = row[v] as number
    if (best.length === k && lp <= (best[k - 1] as TokenChoice).logprob) continue
    let at = best.length
    while (at > 0 && (best[at - 1] as TokenChoice).logprob < lp) at--
    best.splice(at, 0, { token: v, logprob: lp })
    if (best.length > k) best.pop()
  }
  return best
}
