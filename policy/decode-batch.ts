// The decode step: a fixed number of rows over a KV cache of fixed capacity. Sequences join free rows (their
// prompts prefilled together), every `step` samples one token for every live row, and a row is released when
// its sequence ends. Rows sit at different positions: each has its own write column and next position, and
// the cache-valid mask hides what a row has not written. `generate`, rollouts, evaluation and serving all
// decode through this one object (docs/design.md §13).
import { type Feeds, type Fetches, type TensorData, tensor } from '../engine/index.ts'
import { FUSED_IO, fusedDecodeUnsupported } from './decode-graph.ts'
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
   * `plain` (default): model.ts's portable graph. `fused`: decode-graph.ts's GroupQueryAttention graph, its
   * cache updated in place by the run (refused where the model does not allow it, see
   * `fusedDecodeUnsupported`); `auto`: fused where allowed, else plain (`plainReason` says why). Not the
   * default because it does not pay on ORT 1.30's CPU kernels (docs/benchmarks.md §6.4).
   */
  graph?: 'auto' | 'fused' | 'plain'
  /**
   * `frozen`: the weights as they are now baked into the decode sessions (pre-packed once by ORT; re-loaded
   * when they change, see PolicyModel.decodeSession); more memory and a load per policy version. `inputs`
   * (default: the model's `decodeWeights`, itself `inputs` unless set): weights fed to every run.
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
  /** Which decode graph runs, and (plain) why the fused one does not. */
  readonly graph: 'fused' | 'plain'
  readonly plainReason?: string
  // plain: per layer keys (rows, KV, D, S) and values (rows, KV, S, D), rows left-padded to their joining
  // group's longest prompt; fused: both (rows, KV, S, D), each row dense from slot 0 (slot = position)
  readonly #kT: (Float32Array | Float64Array)[]
  readonly #v: (Float32Array | Float64Array)[]
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
    // the adapters are inputs of the plain graph only; the frozen and fused graphs carry the base weights alone
    if (this.#frozen && model.lora)
      throw new DecodeBatchError('frozen decode weights: this model has LoRA adapters (decode it with weights fed)')
    const asked = options.graph ?? 'plain'
    const unsupported =
      asked === 'plain'
        ? undefined
        : model.lora
          ? 'the fused graph has no LoRA adapters'
          : fusedDecodeUnsupported(c, model.dtype)
    if (asked === 'fused' && unsupported) throw new DecodeBatchError(`fused decode: ${unsupported}`)
    this.graph = asked === 'plain' || unsupported ? 'plain' : 'fused'
    if (this.graph === 'plain') this.plainReason = asked === 'plain' ? 'asked for' : unsupported
    const S = this.capacity
    const per = this.rows * c.numKvHeads * c.headDim * S
    const buffer = () => (model.dtype === 'float64' ? new Float64Array(per) : new Float32Array(per))
    this.#kT = Array.from({ length: c.numLayers }, buffer)
    this.#v = Array.from({ length: c.numLayers }, buffer)
    this.#cacheValid = new Float64Array(this.rows * S)
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
    if (this.graph === 'fused') return this.#admitFused(specs, rows, P)
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
    const out = await this.#run(true, sampling, specs, { ids, positions, valid, tq: P })
    const c = this.#model.config
    const S = this.capacity
    const KV = c.numKvHeads
    const D = c.headDim
    for (let l = 0; l < c.numLayers; l++) {
      const nk = out[IO.newK(l)]?.data as Float32Array
      const nv = out[IO.newV(l)]?.data as Float32Array
      const k = this.#kT[l] as Float32Array
      const v = this.#v[l] as Float32Array
      rows.forEach((row, j) => {
        for (let h = 0; h < KV; h++) {
          const src = j * KV + h
          const dst = row * KV + h
          for (let d = 0; d < D; d++) k.set(nk.subarray((src * D + d) * P, (src * D + d + 1) * P), (dst * D + d) * S)
          v.set(nv.subarray(src * P * D, (src + 1) * P * D), dst * S * D)
        }
      })
    }
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
    if (this.graph === 'fused') return this.#stepFused(liveRows, B)
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
    const out = await this.#run(false, sampling, specs, { ids, positions, valid, tq: 1 })
    const c = this.#model.config
    const S = this.capacity
    const KV = c.numKvHeads
    const D = c.headDim
    for (let l = 0; l < c.numLayers; l++) {
      const nk = out[IO.newK(l)]?.data as Float32Array // (B, KV, D, 1)
      const nv = out[IO.newV(l)]?.data as Float32Array // (B, KV, 1, D)
      const k = this.#kT[l] as Float32Array
      const v = this.#v[l] as Float32Array
      for (const row of liveRows) {
        const column = (this.#live[row] as Row).column
        for (let h = 0; h < KV; h++) {
          const bh = row * KV + h
          for (let d = 0; d < D; d++) k[(bh * D + d) * S + column] = nk[bh * D + d] as number
          v.set(nv.subarray(bh * D, (bh + 1) * D), (bh * S + column) * D)
        }
      }
    }
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

  /** admit with the fused graph: prompts right-padded, each row's keys and values copied to slots [0, n). */
  async #admitFused(specs: readonly SequenceSpec[], rows: number[], P: number): Promise<SampledToken[]> {
    const model = this.#model
    const c = model.config
    const J = specs.length
    const ids = new BigInt64Array(J * P)
    const positions = new BigInt64Array(J * P)
    specs.forEach((spec, j) => {
      spec.prompt.forEach((token, i) => {
        ids[j * P + i] = BigInt(token)
        positions[j * P + i] = BigInt(i)
      })
    })
    const sampling = this.#samplingFor(specs)
    const feeds: Feeds = {
      [IO.ids]: tensor('int64', [J, P], ids),
      [FUSED_IO.seqlensK]: tensor(
        'int32',
        [J],
        specs.map((s) => s.prompt.length - 1),
      ),
      [FUSED_IO.totalLength]: tensor('int32', [], [P]),
      ...this.#samplerFeeds(sampling, specs),
    }
    if (c.learnedPositions) feeds[IO.positions] = tensor('int64', [J, P], positions)
    const out = await model.engine.run(await model.decodeSession('fused', sampling, true, this.#frozen), feeds, {
      kept: await model.decodeFeeds(this.#frozen),
    })
    const S = this.capacity
    const KV = c.numKvHeads
    const D = c.headDim
    for (let l = 0; l < c.numLayers; l++) {
      const pk = out[FUSED_IO.presentK(l)]?.data as Float32Array // (J, KV, P, D)
      const pv = out[FUSED_IO.presentV(l)]?.data as Float32Array
      const k = this.#kT[l] as Float32Array
      const v = this.#v[l] as Float32Array
      rows.forEach((row, j) => {
        const n = (specs[j] as SequenceSpec).prompt.length * D
        for (let h = 0; h < KV; h++) {
          const src = (j * KV + h) * P * D
          const dst = (row * KV + h) * S * D
          k.set(pk.subarray(src, src + n), dst)
          v.set(pv.subarray(src, src + n), dst)
        }
      })
    }
    this.stats.prefills++
    this.stats.prefillTokens += specs.reduce((n, s) => n + s.prompt.length, 0)
    return specs.map((spec, j) => {
      const row = rows[j] as number
      const choice = this.#choose(out, sampling, j, spec)
      const n = spec.prompt.length
      this.#live[row] = { spec, last: choice.token, column: n, position: n }
      return { ...choice, row }
    })
  }

  /** step with the fused graph: rows [0, B) of the cache go in as past and come back as present, in place. */
  async #stepFused(liveRows: number[], B: number): Promise<SampledToken[]> {
    const model = this.#model
    const c = model.config
    const ids = new BigInt64Array(B)
    const positions = new BigInt64Array(B)
    const seqlens = new Int32Array(B) // a free row writes its (ignored) token at slot 0
    let longest = 0
    const specs: (SequenceSpec | undefined)[] = Array.from({ length: B }, (_, b) => this.#live[b]?.spec)
    for (const row of liveRows) {
      const r = this.#live[row] as Row
      ids[row] = BigInt(r.last)
      positions[row] = BigInt(r.position)
      seqlens[row] = r.column
      longest = Math.max(longest, r.column)
    }
    const sampling = this.#samplingFor(specs.filter((s): s is SequenceSpec => s !== undefined))
    const S = this.capacity
    const dims = [B, c.numKvHeads, S, c.headDim]
    const n = B * c.numKvHeads * c.headDim * S
    const feeds: Feeds = {
      [IO.ids]: tensor('int64', [B, 1], ids),
      [FUSED_IO.seqlensK]: tensor('int32', [B], seqlens),
      // ≥ 2 (every live row has a prompt token in its cache): GroupQueryAttention reads 1 as a prompt
      [FUSED_IO.totalLength]: tensor('int32', [], [longest + 1]),
      ...this.#samplerFeeds(sampling, specs),
    }
    if (c.learnedPositions) feeds[IO.positions] = tensor('int64', [B, 1], positions)
    const outputs: Feeds = {}
    for (let l = 0; l < c.numLayers; l++) {
      const k = tensor('float32', dims, view(this.#kT[l] as Float32Array, n))
      const v = tensor('float32', dims, view(this.#v[l] as Float32Array, n))
      feeds[FUSED_IO.pastK(l)] = k
      feeds[FUSED_IO.pastV(l)] = v
      outputs[FUSED_IO.presentK(l)] = k
      outputs[FUSED_IO.presentV(l)] = v
    }
    const out = await model.engine.run(await model.decodeSession('fused', sampling, false, this.#frozen), feeds, {
      outputs,
      kept: await model.decodeFeeds(this.#frozen),
    })
    for (let l = 0; l < c.numLayers; l++) {
      // the worker engine hands the moved buffers back in the result: keep those
      this.#kT[l] = rebound(this.#kT[l] as Float32Array, out[FUSED_IO.presentK(l)]?.data as Float32Array)
      this.#v[l] = rebound(this.#v[l] as Float32Array, out[FUSED_IO.presentV(l)]?.data as Float32Array)
    }
    this.stats.steps++
    this.stats.stepRows += liveRows.length
    return liveRows.map((row) => {
      const r = this.#live[row] as Row
      r.column++
      r.position++
      const choice = this.#choose(out, sampling, row, r.spec)
      r.last = choice.token
      return { ...choice, row }
    })
  }

  /** Inverse temperatures, and the uniforms of an in-graph draw (one per row that samples, drawn now). */
  #samplerFeeds(sampling: DecodeSampling, specs: readonly (SequenceSpec | undefined)[]): Feeds {
    const feeds: Feeds = {
      [IO.invTemperature]: this.#model.float(
        [specs.length],
        specs.map((s) => 1 / (s?.temperature ?? 1)),
      ),
    }
    if (sampling === 'in-graph')
      feeds[IO.uniform] = this.#model.float(
        [specs.length],
        specs.map((s) => (s && !s.greedy ? s.rng.next() : 0)),
      )
    return feeds
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
  ): Promise<Fetches> {
    const model = this.#model
    const c = model.config
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
    const lend: string[] = []
    if (!prefill) {
      // rows [0, B) are a prefix of every cache buffer: views, lent to the engine (not copied)
      feeds[IO.cacheValid] = model.float([B, S], this.#cacheValid.subarray(0, B * S))
      const n = B * c.numKvHeads * c.headDim * S
      for (let l = 0; l < c.numLayers; l++) {
        feeds[IO.cacheK(l)] = tensor(model.dtype, [B, c.numKvHeads, c.headDim, S], view(this.#kT[l], n))
        feeds[IO.cacheV(l)] = tensor(model.dtype, [B, c.numKvHeads, S, c.headDim], view(this.#v[l], n))
        lend.push(IO.cacheK(l), IO.cacheV(l))
      }
    }
    if (sampling === 'in-graph') {
      // one uniform per sequence that samples from this run's output, drawn before the run
      feeds[IO.uniform] = model.float(
        [B],
        specs.map((s) => (s && !s.greedy ? s.rng.next() : 0)),
      )
    }
    const session = await model.decodeSession('plain', sampling, prefill, this.#frozen)
    const out = await model.engine.run(session, feeds, { kept: await model.decodeFeeds(this.#frozen), lend })
    if (!prefill) {
      // the worker engine hands the lent buffers back in the result: keep those
      for (let l = 0; l < c.numLayers; l++) {
        this.#kT[l] = rebound(this.#kT[l] as CacheArray, out[IO.cacheK(l)]?.data as CacheArray)
        this.#v[l] = rebound(this.#v[l] as CacheArray, out[IO.cacheV(l)]?.data as CacheArray)
      }
    }
    return out
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

type CacheArray = Float32Array | Float64Array

/** The cache buffer to keep after a run: ours (local engine), or the one the worker handed back (whole). */
function rebound<T extends CacheArray>(mine: T, got: T): T {
  if (got.buffer === mine.buffer) return mine
  return (mine instanceof Float64Array ? new Float64Array(got.buffer) : new Float32Array(got.buffer)) as T
}

function view<T extends Float32Array | Float64Array>(buffer: T | undefined, n: number): T {
  return (buffer as T).subarray(0, n) as T
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
