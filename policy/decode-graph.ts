// The fused decode graph: the same decoder and sampler contract as model.ts's buildDecodeGraph, with
// attention, rotary and the KV-cache update done by ONNX Runtime's com.microsoft GroupQueryAttention CPU
// kernel. Inference only (contrib ops have no gradient rules); the plain buildDecodeGraph stays the portable
// fallback and the reference the parity tests hold this graph to.
//
// Cache layout (what GroupQueryAttention wants): keys and values both (B, KV, S, D), each row's tokens
// dense from slot 0 (no left padding), so a row's slot = its position. A step reads only the slots a row
// has written (seqlens_k + 1 of them), not the whole capacity, and writes its new key/value into the past
// buffer itself when present_key is bound to past_key's memory (`past_present_share_buffer`): nothing is
// copied per step.
import { createBuilder, Graph, type Value } from '../engine/index.ts'
import { attr } from '../engine/ir.ts'
import type { ModelConfig } from './config.ts'
import { type DecodeSampling, type FloatType, IO, samplerHead } from './model.ts'
import { POSITION_TABLE, parameterSpecs } from './parameters.ts'

/** Names of the fused graph's own inputs and outputs (the rest are model.ts's IO names). */
export const FUSED_IO = {
  /** (B) int32: tokens already in the row's cache before this run's last token, i.e. total length − 1. */
  seqlensK: 'seqlens_k',
  /** int32 scalar: the longest row's total length (prefill: the padded prompt length). */
  totalLength: 'total_sequence_length',
  pastK: (l: number) => `past_key.${l}`,
  pastV: (l: number) => `past_value.${l}`,
  presentK: (l: number) => `present_key.${l}`,
  presentV: (l: number) => `present_value.${l}`,
} as const

/** The opset imports the fused graph needs when encoded. */
export const FUSED_DOMAINS = { 'com.microsoft': 1 } as const

/**
 * Why this model cannot use the fused graph, or undefined when it can. ORT 1.30's GroupQueryAttention has a
 * float32 CPU kernel only, and its rotary wants a head size that is a multiple of 16.
 */
export function fusedDecodeUnsupported(c: ModelConfig, dtype: FloatType): string | undefined {
  if (dtype !== 'float32') return `GroupQueryAttention has no ${dtype} CPU kernel (float32 only)`
  if (c.headDim % 16 !== 0) return `GroupQueryAttention's rotary needs a head size divisible by 16, got ${c.headDim}`
  return undefined
}

/**
 * Decode with GroupQueryAttention. `prefill`: ids (B, T) right-padded, row b's prompt in columns
 * [0, seqlens_k[b]], no past; outputs present_key/value (B, KV, T, D) for the caller to place in its cache,
 * and samples at each row's last prompt token. Step: ids (B, 1), past_key/value (B, KV, S, D), the new token
 * written at slot seqlens_k[b] (which is also its position); bind present_key/value to the past buffers.
 * The sampler contract is buildDecodeGraph's (`logprobs` rows, or `in-graph`: one uniform in, sampled and
 * greedy token plus log-prob out).
 */
export function buildFusedDecodeGraph(
  c: ModelConfig,
  sampling: DecodeSampling = 'in-graph',
  options: { prefill?: boolean } = {},
): Graph {
  const reason = fusedDecodeUnsupported(c, 'float32')
  if (reason) throw new Error(`fused decode graph: ${reason}`)
  const prefill = options.prefill ?? false
  const graph = new Graph(`fused-${prefill ? 'prefill' : 'decode'}-${sampling}`)
  const op = createBuilder(graph)
  const dtype = 'float32'
  const params = new Map<string, Value>()
  for (const spec of parameterSpecs(c)) params.set(spec.name, op.input(spec.name, dtype, spec.shape))
  const param = (name: string): Value => {
    const p = params.get(name)
    if (!p) throw new Error(`model parameter ${name} is not declared`)
    return p
  }
  const linear = (x: Value, prefix: string, bias: boolean): Value => {
    const y = op.MatMul(x, op.Transpose(param(`${prefix}.weight`), [1, 0]))
    return bias ? op.Add(y, param(`${prefix}.bias`)) : y
  }
  const T = prefill ? 'T' : 1
  const ids = op.input(IO.ids, 'int64', ['B', T])
  const seqlens = op.input(FUSED_IO.seqlensK, 'int32', ['B'])
  const total = op.input(FUSED_IO.totalLength, 'int32', [])
  const half = c.headDim / 2
  // GroupQueryAttention takes (P, D/2) tables: our (P, D) ones hold each half twice
  const cosCache = op.Slice(op.input(IO.ropeCos, dtype, ['P', c.headDim]), [0], [half], [1])
  const sinCache = op.Slice(op.input(IO.ropeSin, dtype, ['P', c.headDim]), [0], [half], [1])
  const invTemperature = op.Reshape(op.input(IO.invTemperature, dtype, ['B']), [-1, 1, 1]) // (B, 1, 1)
  const eps = { epsilon: c.rmsNormEps }

  let x = op.Gather(param('model.embed_tokens.weight'), ids) // (B, T, C)
  if (c.learnedPositions) x = op.Add(x, op.Gather(param(POSITION_TABLE), op.input(IO.positions, 'int64', ['B', T])))
  const presentK: Value[] = []
  const presentV: Value[] = []
  const S = prefill ? 'T' : 'S'
  for (let l = 0; l < c.numLayers; l++) {
    x = op.scope(`layer${l}`, () => {
      const p = `model.layers.${l}`
      const a = `${p}.self_attn`
      const h0 = op.RMSNormalization(x, param(`${p}.input_layernorm.weight`), eps)
      const q = linear(h0, `${a}.q_proj`, c.qkvBias)
      const k = linear(h0, `${a}.k_proj`, c.qkvBias)
      const v = linear(h0, `${a}.v_proj`, c.qkvBias)
      const kvShape = ['B', c.numKvHeads, S, c.headDim]
      const past = prefill
        ? [null, null]
        : [
            op.input(FUSED_IO.pastK(l), dtype, ['B', c.numKvHeads, 'S', c.headDim]),
            op.input(FUSED_IO.pastV(l), dtype, ['B', c.numKvHeads, 'S', c.headDim]),
          ]
      const [attn, pk, pv] = op.customOp(
        'GroupQueryAttention',
        [q, k, v, past[0] ?? null, past[1] ?? null, seqlens, total, cosCache, sinCache],
        [
          { dtype, shape: ['B', T, c.numHeads * c.headDim] },
          { dtype, shape: kvShape },
          { dtype, shape: kvShape },
        ],
        {
          num_heads: attr.int(c.numHeads),
          kv_num_heads: attr.int(c.numKvHeads),
          do_rotary: attr.int(1),
          rotary_interleaved: attr.int(0),
        },
        'com.microsoft',
      ) as [Value, Value, Value]
      presentK.push(pk)
      presentV.push(pv)
      const h = op.Add(x, linear(attn, `${a}.o_proj`, c.outputBias ?? false))
      const h1 = op.RMSNormalization(h, param(`${p}.post_attention_layernorm.weight`), eps)
      const m = `${p}.mlp`
      const gate = linear(h1, `${m}.gate_proj`, false)
      const swish = op.Mul(gate, op.Sigmoid(gate))
      return op.Add(h, linear(op.Mul(swish, linear(h1, `${m}.up_proj`, false)), `${m}.down_proj`, false))
    })
  }
  const hidden = op.RMSNormalization(x, param('model.norm.weight'), eps) // (B, T, C)
  // the row's last real token: column seqlens_k[b] of a right-padded prefill, the only column of a step
  const last = prefill
    ? op.GatherElements(
        hidden,
        op.Expand(op.Reshape(op.Cast(seqlens, 'int64'), [-1, 1, 1]), op.ints([1, 1, c.hiddenSize])),
        1,
      )
    : hidden // (B, 1, C)
  const out = param(c.tieEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight') // (V, C)
  const logits = op.MatMul(op.Mul(last, invTemperature), op.Transpose(out, [1, 0]))
  const logprobs = op.Squeeze(op.LogSoftmax(logits, -1), [1]) // (B, V)
  samplerHead(op, c, logprobs, sampling, 'float32')
  for (let l = 0; l < c.numLayers; l++) {
    op.output(presentK[l] as Value, FUSED_IO.presentK(l))
    op.output(presentV[l] as Value, FUSED_IO.presentV(l))
  }
  return graph
}
