// The Llama-style decoder, defined once and built into three graph kinds: decode (prefill and steps over a
// fixed-capacity KV cache), score (per-token log-probs and entropy of given tokens) and train (a loss built
// by the caller from in-graph log-probs, plus every parameter's gradient). Weights are graph inputs named as
// Hugging Face names them; every log-prob comes from logits × inv_temperature.
import {
  ADAMW_IO,
  type AdamWGraphConfig,
  appendAdamW,
  type Builder,
  constTensor,
  createBuilder,
  Graph,
  gradients,
  type Value,
} from '../engine/index.ts'
import type { ModelConfig } from './config.ts'
import { type LoraConfig, loraScale, loraSpecs } from './lora.ts'
import { POSITION_TABLE, parameterSpecs } from './parameters.ts'

export type FloatType = 'float32' | 'float64'

/** Additive mask value: large enough to zero a softmax weight, finite so that all-masked rows stay finite. */
const MASKED = -1e9

/** Names of the graph inputs and outputs (the contract between graphs and the code that feeds them). */
export const IO = {
  ids: 'ids',
  positions: 'positions',
  valid: 'valid',
  targets: 'targets',
  invTemperature: 'inv_temperature',
  ropeCos: 'rope_cos',
  ropeSin: 'rope_sin',
  cacheValid: 'cache_valid',
  cacheK: (l: number) => `cache_k_t.${l}`,
  cacheV: (l: number) => `cache_v.${l}`,
  newK: (l: number) => `new_k_t.${l}`,
  newV: (l: number) => `new_v.${l}`,
  logprobs: 'logprobs',
  logits: 'logits',
  uniform: 'uniform',
  sampledToken: 'sampled_token',
  sampledLogprob: 'sampled_logprob',
  greedyToken: 'greedy_token',
  greedyLogprob: 'greedy_logprob',
  tokenLogprobs: 'token_logprobs',
  entropy: 'entropy',
  loss: 'loss',
} as const

interface Common {
  op: Builder
  dtype: FloatType
  c: ModelConfig
  params: Map<string, Value>
  /** LoRA adapter inputs by name (`<module>.lora_A.weight`, `.lora_B.weight`); empty without adapters. */
  adapters: Map<string, Value>
  loraScale: number
  ids: Value // (B, T) int64
  positions: Value // (B, T) int64
  valid: Value // (B, T) 1 = real token, 0 = padding
  cos: Value // (B, 1, T, D)
  sin: Value // (B, 1, T, D)
}

interface LayerCache {
  kT: Value // (B, KV, D, S): keys stored transposed, ready for q·kᵀ
  v: Value // (B, KV, S, D)
}

function declare(op: Builder, c: ModelConfig, dtype: FloatType, T: string, lora?: LoraConfig): Common {
  const params = new Map<string, Value>()
  for (const spec of parameterSpecs(c)) params.set(spec.name, op.input(spec.name, dtype, spec.shape))
  const adapters = new Map<string, Value>()
  for (const spec of lora ? loraSpecs(c, lora) : []) {
    adapters.set(spec.a.name, op.input(spec.a.name, dtype, spec.a.shape))
    adapters.set(spec.b.name, op.input(spec.b.name, dtype, spec.b.shape))
  }
  const ids = op.input(IO.ids, 'int64', ['B', T])
  const positions = op.input(IO.positions, 'int64', ['B', T])
  const valid = op.input(IO.valid, dtype, ['B', T])
  // rotary tables (P, D), halves duplicated as Hugging Face's rotate-half convention wants
  const cosTable = op.input(IO.ropeCos, dtype, ['P', c.headDim])
  const sinTable = op.input(IO.ropeSin, dtype, ['P', c.headDim])
  const cos = op.Unsqueeze(op.Gather(cosTable, positions), [1]) // (B, 1, T, D)
  const sin = op.Unsqueeze(op.Gather(sinTable, positions), [1])
  return { op, dtype, c, params, adapters, loraScale: lora ? loraScale(lora) : 0, ids, positions, valid, cos, sin }
}

function param(m: Common, name: string): Value {
  const p = m.params.get(name)
  if (!p) throw new Error(`model parameter ${name} is not declared`)
  return p
}

/**
 * x · Wᵀ (+ b), W in Hugging Face's (out, in) layout; ORT fuses the transpose into the MatMul. A projection
 * with a LoRA adapter adds (alpha / r)·(x · Aᵀ) · Bᵀ: through the rank-r bottleneck, never a (out, in) product.
 */
function linear(m: Common, x: Value, prefix: string, bias: boolean): Value {
  const { op } = m
  let y = op.MatMul(x, op.Transpose(param(m, `${prefix}.weight`), [1, 0]))
  const a = m.adapters.get(`${prefix}.lora_A.weight`) // (r, in)
  const b = m.adapters.get(`${prefix}.lora_B.weight`) // (out, r)
  if (a && b) {
    const low = op.MatMul(x, op.Transpose(a, [1, 0])) // (…, r)
    y = op.Add(y, op.Mul(op.MatMul(low, op.Transpose(b, [1, 0])), m.loraScale))
  }
  return bias ? op.Add(y, param(m, `${prefix}.bias`)) : y
}

/** Rotate-half rotary embedding on the last axis (size D); cos and sin broadcast over heads. */
function rotary(m: Common, x: Value, cos: Value, sin: Value): Value {
  const { op } = m
  const half = m.c.headDim / 2
  const x1 = op.Slice(x, [0], [half], [-1])
  const x2 = op.Slice(x, [half], [m.c.headDim], [-1])
  return op.Add(op.Mul(x, cos), op.Mul(op.Concat([op.Neg(x2), x1], -1), sin))
}

/** Additive (B, 1, G·Tq, Tk) mask for stacked query rows: causal among the new tokens, padding keys masked. */
function selfMask(m: Common): Value {
  const { op } = m
  const T = op.dim(m.ids, 1)
  const causal = op.Where(op.causalMask(T, T), op.scalar(0, m.dtype), op.scalar(MASKED, m.dtype)) // (T, T)
  const padding = op.Mul(op.Sub(m.valid, 1), -MASKED) // (B, T): 0 valid, MASKED padding
  const mask = op.Add(causal, op.Unsqueeze(padding, [1, 2])) // (B, 1, T, T)
  const G = m.c.numHeads / m.c.numKvHeads
  return G === 1
    ? mask
    : op.Concat(
        Array.from({ length: G }, () => mask),
        2,
      )
}

interface AttentionOut {
  hidden: Value
  newK: Value // (B, KV, T, D)
  newV: Value
}

/**
 * Grouped-query attention. The G = H / KV query heads that share a key/value head are stacked as rows,
 * (B, KV, G·T, D), so every product is a plain batched MatMul against that head's keys and values: no repeat
 * of K and V, no broadcasting inside MatMul. With a cache, scores against the cached keys and against the
 * new keys are computed apart and joined for one softmax: the cache is read, never copied.
 */
function attention(m: Common, l: number, x: Value, mask: Value, cache?: LayerCache & { mask: Value }): AttentionOut {
  const { op, c } = m
  const p = `model.layers.${l}.self_attn`
  const G = c.numHeads / c.numKvHeads
  const D = c.headDim
  // 1/√D scales the scores, except against a cache: there it scales the queries (before rotary, which is
  // linear), because ORT folds a scaled MatMul into a FusedMatMul with an alpha, which loses MLAS's GEMV path
  // for the single-row products against the cache (2× slower at 384 slots, docs/benchmarks.md §6.6); in the
  // score and train graphs the scaled scores measured a little faster
  const scale = 1 / Math.sqrt(D)
  const queries = linear(m, x, `${p}.q_proj`, c.qkvBias)
  const q = op.Transpose(
    op.Reshape(cache ? op.Mul(queries, scale) : queries, [0, 0, c.numKvHeads, G, D]),
    [0, 2, 3, 1, 4],
  )
  const qr = op.Reshape(rotary(m, q, op.Unsqueeze(m.cos, [1]), op.Unsqueeze(m.sin, [1])), [0, 0, -1, D]) // (B, KV, G·T, D)
  const k = op.Transpose(op.Reshape(linear(m, x, `${p}.k_proj`, c.qkvBias), [0, 0, c.numKvHeads, D]), [0, 2, 1, 3])
  const kr = rotary(m, k, m.cos, m.sin) // (B, KV, T, D)
  const v = op.Transpose(op.Reshape(linear(m, x, `${p}.v_proj`, c.qkvBias), [0, 0, c.numKvHeads, D]), [0, 2, 1, 3])
  const products = op.MatMul(qr, op.transposeLast(kr))
  const scoresNew = op.Add(cache ? products : op.Mul(products, scale), mask) // (B, KV, G·T, T)
  let out: Value // (B, KV, G·T, D)
  if (cache) {
    const scoresCache = op.Add(op.MatMul(qr, cache.kT), cache.mask) // (B, KV, G·T, S)
    const att = op.Softmax(op.Concat([scoresCache, scoresNew], -1), -1)
    const S = op.Reshape(op.dim(cache.kT, 3), [1])
    const attCache = op.Slice(att, op.ints([0]), S, [-1])
    const attNew = op.Slice(att, S, op.ints([Number.MAX_SAFE_INTEGER]), [-1])
    out = op.Add(op.MatMul(attCache, cache.v), op.MatMul(attNew, v))
  } else {
    out = op.MatMul(op.Softmax(scoresNew, -1), v)
  }
  const heads = op.Reshape(out, [0, 0, G, -1, D]) // (B, KV, G, T, D)
  const merged = op.Reshape(op.Transpose(heads, [0, 3, 1, 2, 4]), [0, 0, c.numHeads * D]) // (B, T, H·D)
  return { hidden: linear(m, merged, `${p}.o_proj`, c.outputBias ?? false), newK: kr, newV: v }
}

function mlp(m: Common, l: number, x: Value): Value {
  const { op } = m
  const p = `model.layers.${l}.mlp`
  const gate = linear(m, x, `${p}.gate_proj`, false)
  const swish = op.Mul(gate, op.Sigmoid(gate)) // SiLU
  return linear(m, op.Mul(swish, linear(m, x, `${p}.up_proj`, false)), `${p}.down_proj`, false)
}

/** The decoder stack: (B, T) ids → (B, T, C) final-normed hidden states, plus each layer's new K and V. */
function decoder(
  m: Common,
  caches?: Array<LayerCache & { mask: Value }>,
  recomputeLayers = false,
): { hidden: Value; newK: Value[]; newV: Value[] } {
  const { op, c } = m
  const eps = { epsilon: c.rmsNormEps }
  let x = op.Gather(param(m, 'model.embed_tokens.weight'), m.ids) // (B, T, C)
  if (c.learnedPositions) x = op.Add(x, op.Gather(param(m, POSITION_TABLE), m.positions))
  const mask = selfMask(m)
  const newK: Value[] = []
  const newV: Value[] = []
  for (let l = 0; l < c.numLayers; l++) {
    const layer = () => {
      const p = `model.layers.${l}`
      const a = attention(m, l, op.RMSNormalization(x, param(m, `${p}.input_layernorm.weight`), eps), mask, caches?.[l])
      newK.push(a.newK)
      newV.push(a.newV)
      const h = op.Add(x, a.hidden)
      return op.Add(h, mlp(m, l, op.RMSNormalization(h, param(m, `${p}.post_attention_layernorm.weight`), eps)))
    }
    // recomputed: only the layer's input stays alive for the backward pass, the layer runs again there
    x = op.block(`layer${l}`, layer, recomputeLayers ? { recompute: [x] } : {})
  }
  return { hidden: op.RMSNormalization(x, param(m, 'model.norm.weight'), eps), newK, newV }
}

/** Temperature-scaled log-softmax over the vocabulary: (…, C) → (…, V). */
function logSoftmaxScaled(m: Common, hidden: Value, invTemperature: Value): Value {
  const { op, c } = m
  const out = param(m, c.tieEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight') // (V, C)
  // (h / temperature) · Wᵀ = (h · Wᵀ) / temperature: scaling the (…, C) side costs V/C times less than the logits
  const logits = op.MatMul(op.Mul(hidden, invTemperature), op.Transpose(out, [1, 0])) // (…, V)
  return op.LogSoftmax(logits, -1)
}

/**
 * How the decode graph hands back the next token. `logprobs`: the whole (B, V) row of log-probs, for the
 * caller to sample from (top-p). `in-graph`: one uniform number per sequence goes in and the token comes out,
 * drawn by inverse CDF over the vocabulary in id order (the JS sampler's rule at top-p = 1), plus the greedy
 * token: only (B) values leave the graph instead of (B, V).
 */
export type DecodeSampling = 'logprobs' | 'in-graph'

/**
 * Decode: run Tq new tokens per sequence against a fixed-capacity cache of S slots (slots with
 * cache_valid = 0 are ignored), each row at its own inverse temperature (B). Prefill is Tq = prompt length
 * with an empty cache; a step is Tq = 1.
 * Outputs the next token's distribution at the last position (see DecodeSampling) and each layer's new keys
 * (B, KV, D, Tq) and values (B, KV, Tq, D), which the caller writes into its cache.
 */
export function buildDecodeGraph(
  c: ModelConfig,
  dtype: FloatType = 'float32',
  sampling: DecodeSampling = 'logprobs',
  options: { prefill?: boolean; lora?: LoraConfig } = {},
): Graph {
  const graph = new Graph(`${options.prefill ? 'prefill' : 'decode'}-${sampling}`)
  const op = createBuilder(graph)
  const m = declare(op, c, dtype, 'T', options.lora)
  // one temperature per row: a decode batch holds sequences sampled at different temperatures
  const invTemperature = op.Reshape(op.input(IO.invTemperature, dtype, ['B']), [-1, 1, 1]) // (B, 1, 1)
  // prefill starts from an empty cache: attending only among the prompt tokens skips S masked slots per query
  let caches: Array<LayerCache & { mask: Value }> | undefined
  if (!options.prefill) {
    const cacheValid = op.input(IO.cacheValid, dtype, ['B', 'S'])
    const cacheMask = op.Unsqueeze(op.Mul(op.Sub(cacheValid, 1), -MASKED), [1, 2]) // (B, 1, 1, S)
    caches = Array.from({ length: c.numLayers }, (_, l) => ({
      kT: op.input(IO.cacheK(l), dtype, ['B', c.numKvHeads, c.headDim, 'S']),
      v: op.input(IO.cacheV(l), dtype, ['B', c.numKvHeads, 'S', c.headDim]),
      mask: cacheMask,
    }))
  }
  const { hidden, newK, newV } = decoder(m, caches)
  const T = op.Reshape(op.dim(hidden, 1), [1])
  const last = op.Slice(hidden, op.Sub(T, op.ints([1])), T, [1]) // (B, 1, C)
  const logprobs = op.Squeeze(logSoftmaxScaled(m, last, invTemperature), [1]) // (B, V)
  samplerHead(op, c, logprobs, sampling, dtype)
  for (let l = 0; l < c.numLayers; l++) {
    op.output(op.transposeLast(newK[l] as Value), IO.newK(l)) // (B, KV, D, Tq): rows copy straight into the cache
    op.output(newV[l] as Value, IO.newV(l))
  }
  return graph
}

/**
 * The decode graphs' outputs from the last position's (B, V) log-probs: the log-probs themselves, or (in-graph
 * sampling) the token drawn with one seeded uniform per row and the greedy token, each with its log-prob.
 */
export function samplerHead(
  op: Builder,
  c: ModelConfig,
  logprobs: Value,
  sampling: DecodeSampling,
  dtype: FloatType,
): void {
  if (sampling === 'logprobs') {
    op.output(logprobs, IO.logprobs)
    return
  }
  const uniform = op.input(IO.uniform, dtype, ['B'])
  const pick = (token: Value, name: string, logprobName: string) => {
    op.output(token, name)
    op.output(op.Squeeze(op.GatherElements(logprobs, op.Unsqueeze(token, [1]), 1), [1]), logprobName)
  }
  // token = #{v : cdf[v] < u}, the first id whose cumulative mass reaches u (clamped for rounding)
  const [cdf] = op.customOp(
    'CumSum',
    [op.Exp(logprobs), op.constant(constTensor('int64', [], [1]))],
    [{ dtype, shape: ['B', c.vocabSize] }],
  )
  const below = op.ReduceSum(op.Cast(op.Less(cdf as Value, op.Unsqueeze(uniform, [1])), 'int64'), [1], {
    keepdims: 0,
  })
  pick(op.Min(below, op.constant(constTensor('int64', [], [c.vocabSize - 1]))), IO.sampledToken, IO.sampledLogprob)
  pick(op.ArgMax(logprobs, 1, { keepdims: 0 }), IO.greedyToken, IO.greedyLogprob)
}

/** Full forward: raw logits (B, T, V) at every position (reference checks and deployment export). */
export function buildForwardGraph(c: ModelConfig, dtype: FloatType = 'float32', lora?: LoraConfig): Graph {
  const graph = new Graph('forward')
  const op = createBuilder(graph)
  const m = declare(op, c, dtype, 'T', lora)
  const { hidden } = decoder(m)
  const out = param(m, c.tieEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight') // (V, C)
  op.output(op.MatMul(hidden, op.Transpose(out, [1, 0])), IO.logits)
  return graph
}

export interface TokenScores {
  /** log π(targets[b, t] | ids[b, ≤ t]) under temperature-scaled logits. (B, T) */
  logp: Value
  /** Entropy of the temperature-scaled next-token distribution at each position. (B, T) */
  entropy: Value
}

/** How score and train graphs are laid out (none of it changes what they compute, beyond rounding), and adapters. */
export interface GraphOptions {
  /**
   * Rows (tokens) of the (B·T, V) logits are computed in this many chunks, each a recompute region, so only
   * one chunk's logits are alive at a time in the forward and the backward pass: memory of a vocabulary-sized
   * tensor stays that of about 8,192 columns whatever the vocabulary. Default `defaultLogitChunks(config)`.
   */
  logitChunks?: number
  /** Train graphs keep only each decoder layer's input and run the layer again in the backward pass. */
  recomputeLayers?: boolean
  /** LoRA adapters on the targeted projections (policy/lora.ts): unlike the layout, they change the function. */
  lora?: LoraConfig
}

/** Vocabulary / 8,192 chunks, rounded (1, i.e. no chunking, for vocabularies up to 12,288). */
export function defaultLogitChunks(c: ModelConfig): number {
  return Math.max(1, Math.round(c.vocabSize / 8192))
}

/** Log-prob of each target and entropy at each row of `hidden` (…, C) → (…). */
function rowScores(m: Common, hidden: Value, targets: Value, invTemperature: Value): TokenScores {
  const { op } = m
  const logprobs = logSoftmaxScaled(m, hidden, invTemperature) // (…, V)
  const logp = op.Squeeze(op.GatherElements(logprobs, op.Unsqueeze(targets, [-1]), -1), [-1])
  const entropy = op.Neg(op.ReduceSum(op.Mul(op.Exp(logprobs), logprobs), [-1], { keepdims: 0 }))
  return { logp, entropy }
}

/**
 * The (B, T) scores over `chunks` row chunks of the flattened (B·T, C) hidden states: chunk i holds rows
 * [i·s, min((i + 1)·s, B·T)) with s = ⌈B·T / chunks⌉ (empty chunks when B·T < chunks are harmless).
 */
function chunkedScores(m: Common, hidden: Value, targets: Value, invTemperature: Value, chunks: number): TokenScores {
  const { op, c } = m
  const rows = op.Reshape(hidden, [-1, c.hiddenSize]) // (N, C)
  const flatTargets = op.Reshape(targets, [-1]) // (N)
  const n = op.Shape(flatTargets) // [N]
  const size = op.Div(op.Add(n, chunks - 1), chunks)
  const logps: Value[] = []
  const entropies: Value[] = []
  for (let i = 0; i < chunks; i++) {
    const start = op.Min(op.Mul(size, i), n)
    const end = op.Min(op.Mul(size, i + 1), n)
    const h = op.Slice(rows, start, end, [0])
    const t = op.Slice(flatTargets, start, end, [0])
    const scores = op.block(`logits${i}`, () => rowScores(m, h, t, invTemperature), { recompute: [h] })
    logps.push(scores.logp)
    entropies.push(scores.entropy)
  }
  const shape = op.Shape(targets)
  return { logp: op.Reshape(op.Concat(logps, 0), shape), entropy: op.Reshape(op.Concat(entropies, 0), shape) }
}

/** The shared body of score and train graphs: per-token log-probs of `targets` and entropies. */
function scoreBody(
  op: Builder,
  c: ModelConfig,
  dtype: FloatType,
  options: GraphOptions,
): { m: Common; scores: TokenScores } {
  const m = declare(op, c, dtype, 'T', options.lora)
  const targets = op.input(IO.targets, 'int64', ['B', 'T'])
  const invTemperature = op.input(IO.invTemperature, dtype, [])
  const { hidden } = decoder(m, undefined, options.recomputeLayers)
  const chunks = options.logitChunks ?? defaultLogitChunks(c)
  if (!(Number.isInteger(chunks) && chunks >= 1))
    throw new RangeError(`logitChunks must be an integer ≥ 1, got ${chunks}`)
  const scores =
    chunks === 1
      ? rowScores(m, hidden, targets, invTemperature)
      : chunkedScores(m, hidden, targets, invTemperature, chunks)
  return { m, scores }
}

/** Score: per-token log-probs and entropies of given tokens under given contexts; logits stay inside. */
export function buildScoreGraph(c: ModelConfig, dtype: FloatType = 'float32', options: GraphOptions = {}): Graph {
  const graph = new Graph('score')
  const op = createBuilder(graph)
  const { scores } = scoreBody(op, c, dtype, { ...options, recomputeLayers: false })
  op.output(scores.logp, IO.tokenLogprobs)
  op.output(scores.entropy, IO.entropy)
  return graph
}

/** Builds the loss from the in-graph scores; may declare its own per-token inputs with `op.input`. */
export type LossBuilder = (
  op: Builder,
  scores: TokenScores,
  dtype: FloatType,
) => { loss: Value; extra?: Record<string, Value> }

/**
 * A train graph of one micro-batch of a step (gradient accumulation, with an optimizer): `sum` adds the gradient
 * of the micro-batch's loss, weighted by `loss_scale`, to the kept sums (`<name>.grad_sum` → `.next`, written in
 * place); `apply` adds the last micro-batch's to them and takes the optimizer step on the total.
 */
export type Accumulation = 'sum' | 'apply'

/**
 * Train: one run returns the loss, the per-token log-probs, any extra outputs of the loss builder (diagnostics)
 * and `<parameter>_grad` for every parameter. The entropy is computed only when the loss (or an extra output)
 * uses it: encoding drops the nodes no output needs, and the (B, T, V) passes it costs are not free.
 * With `lora`, only the adapters get gradients (`<adapter>_grad`): the base weights are frozen inputs, and the
 * weight-gradient MatMuls no output needs are dropped at encoding. With `optimizer`, the gradients stay inside:
 * clipping, AdamW and the finiteness guard follow them (engine/adamw-graph.ts), and the outputs are the trained
 * tensors' and their moments' new values (`<name>.next`) with the gradient norm and `finite`.
 */
export function buildTrainGraph(
  c: ModelConfig,
  lossBuilder: LossBuilder,
  dtype: FloatType = 'float32',
  options: GraphOptions = {},
  optimizer?: AdamWGraphConfig,
  accumulation?: Accumulation,
): Graph {
  const graph = new Graph('train')
  const op = createBuilder(graph)
  const { m, scores } = scoreBody(op, c, dtype, options)
  const { loss, extra } = lossBuilder(op, scores, dtype)
  op.output(loss, IO.loss)
  op.output(scores.logp, IO.tokenLogprobs)
  for (const [name, value] of Object.entries(extra ?? {})) op.output(value, name)
  const trained = options.lora ? [...m.adapters.values()] : [...m.params.values()]
  if (!optimizer) {
    gradients(op, loss, trained)
    return graph
  }
  if (!accumulation) {
    appendAdamW(op, loss, trained, gradients(op, loss, trained, { outputs: false }), optimizer)
    return graph
  }
  // a micro-batch: the gradient of its share of the step's loss, added to the sums of the micro-batches before it
  const scale = op.input(ADAMW_IO.lossScale, dtype, [])
  const grads = gradients(op, loss, trained, { outputs: false, seed: scale })
  const sums = grads.map((g, i) => {
    const p = trained[i] as Value
    return op.Add(op.input(ADAMW_IO.gradientSum(p.name), dtype, p.shape), g)
  })
  if (accumulation === 'sum') {
    sums.forEach((sum, i) => {
      op.output(sum, ADAMW_IO.next(ADAMW_IO.gradientSum((trained[i] as Value).name)))
    })
    return graph
  }
  appendAdamW(op, op.Mul(loss, scale), trained, sums, optimizer)
  return graph
}
