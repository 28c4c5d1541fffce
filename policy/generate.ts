import { type Feeds, type Fetches, type TensorData, tensor } from '../engine/index.ts'
import { type DecodeSampling, IO } from './model.ts'
import type { PolicyModel } from './policy-model.ts'
import { argmax, sampleFromLogprobs, stopIndex, type TokenChoice, type UniformSource } from './sampling.ts'

export interface GenerateOptions {
  maxNewTokens: number
  temperature: number
  /** Nucleus mass in (0, 1]; 1 = the whole distribution. */
  topP?: number
  /** Greedy decoding (argmax) instead of sampling; log-probs are still the temperature-scaled ones. */
  greedy?: boolean
  /** Token ids that end a sequence (included in its tokens). */
  eosIds: readonly number[]
  /** Strings that end a sequence once they appear in its decoded text (needs `decode`). */
  stop?: readonly string[]
  decode?: (ids: readonly number[]) => string
  /** One source per sequence, so a sequence's tokens do not depend on its batch neighbours. */
  rngs: readonly UniformSource[]
  /**
   * Where the token is drawn. Default: in the graph when top-p is 1 (only (B) values leave the graph), from
   * the returned (B, V) log-probs otherwise. Both use one uniform per sequence and step, in vocabulary order.
   */
  sampling?: DecodeSampling
}

export interface Generation {
  tokens: number[]
  /** log π(token) of each sampled token, temperature-scaled, untruncated by top-p. */
  logprobs: number[]
  finish: 'eos' | 'stop' | 'length'
}

export interface GenerateResult {
  sequences: Generation[]
  stats: { prefillTokens: number; newTokens: number; seconds: number; tokensPerSecond: number }
}

/**
 * Batched sampling with a fixed-capacity KV cache: prompts are left-padded and prefilled in one run; each step
 * feeds one token per sequence and writes the returned keys and values into the cache in place (the cache is
 * an input that is read, never returned).
 */
export async function generate(
  model: PolicyModel,
  prompts: readonly (readonly number[])[],
  options: GenerateOptions,
): Promise<GenerateResult> {
  const started = performance.now()
  const c = model.config
  const B = prompts.length
  if (B === 0) return { sequences: [], stats: { prefillTokens: 0, newTokens: 0, seconds: 0, tokensPerSecond: 0 } }
  if (options.rngs.length !== B) throw new RangeError(`need one rng per prompt: ${options.rngs.length} for ${B}`)
  if (prompts.some((p) => p.length === 0)) throw new RangeError('every prompt needs at least one token')
  const P = Math.max(...prompts.map((p) => p.length))
  const S = P + options.maxNewTokens // cache slots
  if (S > c.maxPositions)
    throw new RangeError(`prompt ${P} + ${options.maxNewTokens} new tokens exceed ${c.maxPositions} positions`)
  const KV = c.numKvHeads
  const D = c.headDim
  const topP = options.topP ?? 1
  const sampling: DecodeSampling = options.sampling ?? (topP >= 1 ? 'in-graph' : 'logprobs')
  if (sampling === 'in-graph' && topP < 1)
    throw new RangeError(`in-graph sampling draws from the whole distribution; top-p ${topP} needs 'logprobs'`)
  const handle = await model.decodeModel(sampling)
  const prefillHandle = await model.decodeModel(sampling, true)
  const base = model.baseFeeds()
  const invTemperature = model.float([], [1 / options.temperature])
  const buffer = (n: number) => (model.dtype === 'float64' ? new Float64Array(n) : new Float32Array(n))
  const kT = Array.from({ length: c.numLayers }, () => buffer(B * KV * D * S))
  const vC = Array.from({ length: c.numLayers }, () => buffer(B * KV * S * D))
  const cacheValid = new Float64Array(B * S)
  const nextPosition = prompts.map((p) => p.length)

  // prefill: left-padded prompts; padding positions are 0 and masked
  const ids = new BigInt64Array(B * P)
  const positions = new BigInt64Array(B * P)
  const valid = new Float64Array(B * P)
  prompts.forEach((prompt, b) => {
    const pad = P - prompt.length
    prompt.forEach((token, i) => {
      ids[b * P + pad + i] = BigInt(token)
      positions[b * P + pad + i] = BigInt(i)
      valid[b * P + pad + i] = 1
    })
  })
  const sequences: Generation[] = prompts.map(() => ({ tokens: [], logprobs: [], finish: 'length' }))
  const active = prompts.map(() => true)
  const uniform = new Float64Array(B)
  const run = async (
    tq: number,
    stepIds: BigInt64Array,
    stepPositions: BigInt64Array,
    stepValid: Float64Array,
    slot: number,
  ) => {
    const feeds: Feeds = {
      ...base,
      [IO.ids]: tensor('int64', [B, tq], stepIds),
      [IO.positions]: tensor('int64', [B, tq], stepPositions),
      [IO.valid]: model.float([B, tq], stepValid),
      [IO.invTemperature]: invTemperature,
    }
    const prefill = slot === 0 // the cache is still empty: the prefill graph takes no cache inputs
    if (!prefill) {
      feeds[IO.cacheValid] = model.float([B, S], cacheValid)
      for (let l = 0; l < c.numLayers; l++) {
        feeds[IO.cacheK(l)] = tensor(model.dtype, [B, KV, D, S], kT[l] as Float32Array)
        feeds[IO.cacheV(l)] = tensor(model.dtype, [B, KV, S, D], vC[l] as Float32Array)
      }
    }
    if (sampling === 'in-graph') {
      // one uniform per sequence that will sample from this run's output, drawn before the run
      for (let b = 0; b < B; b++)
        uniform[b] = active[b] && !options.greedy ? (options.rngs[b] as UniformSource).next() : 0
      feeds[IO.uniform] = model.float([B], uniform)
    }
    const out = await model.engine.run(prefill ? prefillHandle : handle, feeds)
    // write the new keys (B, KV, D, tq) and values (B, KV, tq, D) into slots [slot, slot + tq)
    for (let l = 0; l < c.numLayers; l++) {
      const nk = out[IO.newK(l)]?.data as Float32Array
      const nv = out[IO.newV(l)]?.data as Float32Array
      const k = kT[l] as Float32Array
      const v = vC[l] as Float32Array
      for (let bh = 0; bh < B * KV; bh++) {
        for (let d = 0; d < D; d++)
          k.set(nk.subarray((bh * D + d) * tq, (bh * D + d + 1) * tq), (bh * D + d) * S + slot)
        v.set(nv.subarray(bh * tq * D, (bh + 1) * tq * D), (bh * S + slot) * D)
      }
    }
    for (let b = 0; b < B; b++)
      for (let t = 0; t < tq; t++) cacheValid[b * S + slot + t] = stepValid[b * tq + t] as number
    return out
  }

  const V = c.vocabSize
  const chooseToken = (result: Fetches, b: number): TokenChoice => {
    if (sampling === 'in-graph') {
      const [token, logprob] = options.greedy
        ? [IO.greedyToken, IO.greedyLogprob]
        : [IO.sampledToken, IO.sampledLogprob]
      return { token: Number(result[token]?.data[b]), logprob: Number(result[logprob]?.data[b]) }
    }
    const row = (result[IO.logprobs] as TensorData).data.subarray(b * V, (b + 1) * V) as Float32Array
    return options.greedy ? argmax(row) : sampleFromLogprobs(row, topP, options.rngs[b] as UniformSource)
  }
  let out = await run(P, ids, positions, valid, 0)
  let newTokens = 0
  for (let step = 0; step < options.maxNewTokens; step++) {
    const stepIds = new BigInt64Array(B)
    const stepPositions = new BigInt64Array(B)
    const stepValid = new Float64Array(B)
    for (let b = 0; b < B; b++) {
      if (!active[b]) continue
      const choice = chooseToken(out, b)
      const seq = sequences[b] as Generation
      seq.tokens.push(choice.token)
      seq.logprobs.push(choice.logprob)
      newTokens++
      if (options.eosIds.includes(choice.token)) {
        seq.finish = 'eos'
        active[b] = false
      } else if (options.stop?.length && options.decode && stopIndex(options.decode(seq.tokens), options.stop) >= 0) {
        seq.finish = 'stop'
        active[b] = false
      }
      stepIds[b] = BigInt(choice.token)
      stepPositions[b] = BigInt(nextPosition[b] as number)
      nextPosition[b] = (nextPosition[b] as number) + 1
      stepValid[b] = active[b] ? 1 : 0
    }
    if (!active.some(Boolean) || step === options.maxNewTokens - 1) break
    out = await run(1, stepIds, stepPositions, stepValid, P + step)
  }
  const seconds = (performance.now() - started) / 1000
  const prefillTokens = prompts.reduce((n, p) => n + p.length, 0)
  return { sequences, stats: { prefillTokens, newTokens, seconds, tokensPerSecond: newTokens / seconds } }
}
