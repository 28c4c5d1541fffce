// LoRA adapters (Hu et al. 2021) in PEFT's layout: a targeted projection y = x·Wᵀ becomes
// y = x·Wᵀ + (alpha / r)·(x·Aᵀ)·Bᵀ with A (r, in) and B (out, r); the base weights stay frozen. Names, init and
// the saved files follow PEFT (adapter_config.json + adapter_model.safetensors), so PEFT loads what we write.
import type { ModelConfig } from './config.ts'
import { LORA_TARGETS, type LoraTarget } from './lora-targets.ts'
import { decodeSafetensors, encodeSafetensors, fromFloat32, type RawTensor, toFloat32 } from './safetensors.ts'
import type { UniformSource } from './sampling.ts'

export { LORA_TARGETS, type LoraTarget }

export interface LoraConfig {
  rank: number
  alpha: number
  /** Dropout on the adapter's input; only 0 is implemented (the run config refuses more). */
  dropout: number
  targets: readonly LoraTarget[]
}

/** PEFT's LoraConfig defaults (r 8, lora_alpha 8, lora_dropout 0; q_proj and v_proj, its Llama default). */
export const LORA_DEFAULTS: LoraConfig = { rank: 8, alpha: 8, dropout: 0, targets: ['q_proj', 'v_proj'] }

export class LoraError extends Error {
  override name = 'LoraError'
}

/** One adapter matrix pair of one projection: A (r, in) and B (out, r). */
export interface LoraSpec {
  /** The projection's module path, e.g. `model.layers.0.self_attn.q_proj`. */
  module: string
  target: LoraTarget
  a: { name: string; shape: [number, number] }
  b: { name: string; shape: [number, number] }
}

/** The Hugging Face module path of a target in layer `l`. */
export function targetModule(l: number, target: LoraTarget): string {
  const block = target === 'gate_proj' || target === 'up_proj' || target === 'down_proj' ? 'mlp' : 'self_attn'
  return `model.layers.${l}.${block}.${target}`
}

/** (out, in) of a target projection. */
function targetShape(c: ModelConfig, target: LoraTarget): [number, number] {
  const C = c.hiddenSize
  const q = c.numHeads * c.headDim
  const kv = c.numKvHeads * c.headDim
  const I = c.intermediateSize
  const shapes: Record<LoraTarget, [number, number]> = {
    q_proj: [q, C],
    k_proj: [kv, C],
    v_proj: [kv, C],
    o_proj: [C, q],
    gate_proj: [I, C],
    up_proj: [I, C],
    down_proj: [C, I],
  }
  return shapes[target]
}

/**
 * Every adapter pair, layer by layer and in LORA_TARGETS order (the order of graph inputs and gradients). The
 * names are the module path + `.lora_A.weight` / `.lora_B.weight`, PEFT's names without `base_model.model.`.
 */
export function loraSpecs(c: ModelConfig, lora: LoraConfig): LoraSpec[] {
  const specs: LoraSpec[] = []
  for (let l = 0; l < c.numLayers; l++) {
    for (const target of LORA_TARGETS) {
      if (!lora.targets.includes(target)) continue
      const module = targetModule(l, target)
      const [out, inp] = targetShape(c, target)
      specs.push({
        module,
        target,
        a: { name: `${module}.lora_A.weight`, shape: [lora.rank, inp] },
        b: { name: `${module}.lora_B.weight`, shape: [out, lora.rank] },
      })
    }
  }
  return specs
}

/** The scale of the adapter's update: alpha / r (PEFT without rsLoRA). */
export function loraScale(lora: LoraConfig): number {
  return lora.alpha / lora.rank
}

/**
 * Fresh adapters as PEFT initialises them: A ~ kaiming_uniform(a = √5), which is U(−1/√in, 1/√in), and B = 0,
 * so a fresh adapter leaves the model unchanged.
 */
export function initLora(c: ModelConfig, lora: LoraConfig, rng: UniformSource): Map<string, Float32Array> {
  const adapters = new Map<string, Float32Array>()
  for (const spec of loraSpecs(c, lora)) {
    const [r, inp] = spec.a.shape
    const bound = 1 / Math.sqrt(inp)
    adapters.set(
      spec.a.name,
      Float32Array.from({ length: r * inp }, () => (2 * rng.next() - 1) * bound),
    )
    adapters.set(spec.b.name, new Float32Array(spec.b.shape[0] * spec.b.shape[1]))
  }
  return adapters
}

/** Throws unless `adapters` holds exactly the tensors `lora` implies for `c`, with their sizes. */
export function checkAdapters(c: ModelConfig, lora: LoraConfig, adapters: Map<string, Float32Array>, source: string) {
  const expected = new Map<string, number>()
  for (const s of loraSpecs(c, lora)) {
    expected.set(s.a.name, s.a.shape[0] * s.a.shape[1])
    expected.set(s.b.name, s.b.shape[0] * s.b.shape[1])
  }
  for (const [name, n] of expected) {
    const t = adapters.get(name)
    if (!t) throw new LoraError(`${source}: adapter tensor ${name} is missing`)
    if (t.length !== n) throw new LoraError(`${source}: adapter tensor ${name} has ${t.length} values, expected ${n}`)
  }
  for (const name of adapters.keys())
    if (!expected.has(name)) throw new LoraError(`${source}: adapter tensor ${name} is not part of this LoRA config`)
}

/**
 * The merged weights W + (alpha / r)·B·A of every targeted projection (float64 accumulation, rounded once to
 * float32); other weights are shared with `weights`, not copied.
 */
export function mergeLora(
  weights: Map<string, Float32Array>,
  adapters: Map<string, Float32Array>,
  c: ModelConfig,
  lora: LoraConfig,
): Map<string, Float32Array> {
  checkAdapters(c, lora, adapters, 'mergeLora')
  const merged = new Map(weights)
  const scale = loraScale(lora)
  const r = lora.rank
  for (const spec of loraSpecs(c, lora)) {
    const name = `${spec.module}.weight`
    const w = weights.get(name)
    if (!w) throw new LoraError(`mergeLora: base weight ${name} is missing`)
    const A = adapters.get(spec.a.name) as Float32Array // (r, in)
    const B = adapters.get(spec.b.name) as Float32Array // (out, r)
    const [out, inp] = [spec.b.shape[0], spec.a.shape[1]]
    const m = new Float32Array(w.length)
    const row = new Float64Array(inp)
    for (let o = 0; o < out; o++) {
      row.fill(0)
      for (let k = 0; k < r; k++) {
        const bk = (B[o * r + k] as number) * scale
        if (bk === 0) continue
        const a = k * inp
        for (let i = 0; i < inp; i++) row[i] = (row[i] as number) + bk * (A[a + i] as number)
      }
      const base = o * inp
      for (let i = 0; i < inp; i++) m[base + i] = (w[base + i] as number) + (row[i] as number)
    }
    merged.set(name, m)
  }
  return merged
}

/** PEFT's key prefix for a causal LM's adapter tensors. */
const PEFT_PREFIX = 'base_model.model.'

/** adapter_config.json and adapter_model.safetensors, as PEFT's `save_pretrained` writes them. */
export function encodePeftAdapter(
  c: ModelConfig,
  lora: LoraConfig,
  adapters: Map<string, Float32Array>,
  baseModel: string,
): { config: Uint8Array; model: Uint8Array } {
  checkAdapters(c, lora, adapters, 'adapter')
  const tensors = new Map<string, RawTensor>()
  for (const spec of loraSpecs(c, lora)) {
    tensors.set(PEFT_PREFIX + spec.a.name, fromFloat32(adapters.get(spec.a.name) as Float32Array, spec.a.shape))
    tensors.set(PEFT_PREFIX + spec.b.name, fromFloat32(adapters.get(spec.b.name) as Float32Array, spec.b.shape))
  }
  const config = {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: baseModel,
    r: lora.rank,
    lora_alpha: lora.alpha,
    lora_dropout: lora.dropout,
    target_modules: [...lora.targets],
    bias: 'none',
    fan_in_fan_out: false,
    use_rslora: false,
    use_dora: false,
    init_lora_weights: true,
    inference_mode: true,
    modules_to_save: null,
    rank_pattern: {},
    alpha_pattern: {},
  }
  return {
    config: Buffer.from(`${JSON.stringify(config, null, 2)}\n`, 'utf8'),
    model: encodeSafetensors(tensors, { format: 'pt' }),
  }
}

/** Reads a PEFT LoRA adapter (the options we write; anything PEFT adds that changes the maths is refused). */
export function decodePeftAdapter(
  c: ModelConfig,
  files: { config: Uint8Array; model: Uint8Array },
  source = 'adapter',
): { lora: LoraConfig; adapters: Map<string, Float32Array>; baseModel: string } {
  const j = JSON.parse(Buffer.from(files.config).toString('utf8')) as Record<string, unknown>
  const fail = (what: string) => new LoraError(`${source}/adapter_config.json: ${what}`)
  if (j.peft_type !== 'LORA') throw fail(`peft_type ${JSON.stringify(j.peft_type)} is not LORA`)
  if (j.bias !== undefined && j.bias !== 'none') throw fail(`bias ${JSON.stringify(j.bias)} is not supported`)
  for (const flag of ['use_rslora', 'use_dora', 'fan_in_fan_out'] as const)
    if (j[flag] === true) throw fail(`${flag} is not supported`)
  for (const pattern of ['rank_pattern', 'alpha_pattern'] as const)
    if (j[pattern] && Object.keys(j[pattern] as object).length > 0) throw fail(`${pattern} is not supported`)
  const targets = j.target_modules
  if (!Array.isArray(targets) || targets.some((t) => !(LORA_TARGETS as readonly string[]).includes(t)))
    throw fail(`target_modules ${JSON.stringify(targets)} must be a list of ${LORA_TARGETS.join(', ')}`)
  if (typeof j.r !== 'number' || typeof j.lora_alpha !== 'number') throw fail('r and lora_alpha must be numbers')
  const lora: LoraConfig = {
    rank: j.r,
    alpha: j.lora_alpha,
    dropout: typeof j.lora_dropout === 'number' ? j.lora_dropout : 0,
    targets: LORA_TARGETS.filter((t) => targets.includes(t)),
  }
  const { tensors } = decodeSafetensors(files.model, `${source}/adapter_model.safetensors`)
  const adapters = new Map<string, Float32Array>()
  for (const [key, t] of tensors) {
    if (!key.startsWith(PEFT_PREFIX))
      throw new LoraError(`${source}/adapter_model.safetensors: tensor ${key} is not under ${PEFT_PREFIX}`)
    adapters.set(key.slice(PEFT_PREFIX.length), toFloat32(t, key))
  }
  checkAdapters(c, lora, adapters, `${source}/adapter_model.safetensors`)
  return { lora, adapters, baseModel: typeof j.base_model_name_or_path === 'string' ? j.base_model_name_or_path : '' }
}
