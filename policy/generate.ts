import { DecodeBatch } from './decode-batch.ts'
import type { DecodeSampling } from './model.ts'
import type { DecodeWeights, PolicyModel } from './policy-model.ts'
import { stopIndex, type UniformSource } from './sampling.ts'

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
  /** Trained weights fed from the engine, or baked into pre-packed sessions (DecodeBatchOptions.weights). */
  weights?: DecodeWeights
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
 * Batched sampling over one decode batch (policy/decode-batch.ts) of one row per prompt and a cache of
 * longest prompt + `maxNewTokens` slots: the prompts are prefilled together, then every step samples one token
 * per unfinished sequence, and a sequence's row is released when it ends.
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
  const topP = options.topP ?? 1
  const sampling: DecodeSampling = options.sampling ?? (topP >= 1 ? 'in-graph' : 'logprobs')
  if (sampling === 'in-graph' && topP < 1)
    throw new RangeError(`in-graph sampling draws from the whole distribution; top-p ${topP} needs 'logprobs'`)
  const sequences: Generation[] = prompts.map(() => ({ tokens: [], logprobs: [], finish: 'length' }))
  if (options.maxNewTokens < 1) return { sequences, stats: statsSince(started, prompts, 0) }
  const batch = new DecodeBatch(model, {
    rows: B,
    capacity: S,
    sampling,
    ...(options.weights ? { weights: options.weights } : {}),
  })
  let newTokens = 0
  try {
    let sampled = await batch.admit(
      prompts.map((prompt, b) => ({
        prompt,
        temperature: options.temperature,
        greedy: options.greedy ?? false,
        topP,
        rng: options.rngs[b] as UniformSource,
      })),
    )
    for (let step = 0; ; step++) {
      for (const choice of sampled) {
        const seq = sequences[choice.row] as Generation
        seq.tokens.push(choice.token)
        seq.logprobs.push(choice.logprob)
        newTokens++
        if (options.eosIds.includes(choice.token)) seq.finish = 'eos'
        else if (options.stop?.length && options.decode && stopIndex(options.decode(seq.tokens), options.stop) >= 0)
          seq.finish = 'stop'
        else if (step < options.maxNewTokens - 1) continue
        batch.release(choice.row)
      }
      if (batch.live === 0) break
      sampled = await batch.step()
    }
  } finally {
    await batch.close()
  }
  return { sequences, stats: statsSince(started, prompts, newTokens) }
}

function statsSince(started: number, prompts: readonly (readonly number[])[], newTokens: number) {
  const seconds = (performance.now() - started) / 1000
  const prefillTokens = prompts.reduce((n, p) => n + p.length, 0)
  return { prefillTokens, newTokens, seconds, tokensPerSecond: newTokens / seconds }
}
