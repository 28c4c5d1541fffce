// The GPU check of issue 43: seedflow's engine on an execution provider (CUDA on a GPU machine; the CPU anywhere
// else, which is how CI proves the check and its pack run), step by step, each step's results written to the
// output file as soon as it finishes (a check cut short by its machine keeps what it measured):
//   environment  the ORT library this process loaded, the provider's probe, the GPU (nvidia-smi) when there is one;
//   placement    which provider ORT gives each node of the train, score and decode graphs (its verbose log, read in
//                a child process): the ops it leaves on the CPU, and those of them the CPU-fallback guard refuses;
//   guard        the guard (engine/cpu-fallback.ts) firing on a model with an op the provider lacks (Det);
//   parity       the provider against the CPU on one shape and the same weights: a train step's loss and gradient
//                norm, the per-token log-probs of a scored batch, greedy tokens of a decode (where tokens differ,
//                the top-two logit gap on the CPU at the first difference: random weights have near-ties);
//   train        the product's `trainer.step` (the optimizer in the graph; the updated tensors feed the next step)
//                per shape: LoRA over a baked base, and full fine-tuning, with the bytes that cross between host
//                memory and the device per step (onnxruntime-node has no device tensors: every feed, every kept
//                tensor a run reads and every fetch and in-place output crosses);
//   decode       greedy decoding of B rows × (prompt + new tokens) by a LoRA policy, the base baked.
// Plans: `smoke` (the tiny preset: seconds on a CPU, for CI) and `h200` (SmolLM2, Qwen2.5-0.5B and -3B shapes).
//   node --import tsx bench/gpu-check.ts --execution-provider cpu --plan smoke --out /tmp/gpu.json
//   node --import tsx bench/gpu-check.ts --execution-provider cuda --plan h200 --out "$OUT/gpu.json"
import { execFileSync } from 'node:child_process'
import { realpathSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { createBuilder } from '../engine/builder.ts'
import { CpuFallbackError, readModelProto, refusedCpuNodes } from '../engine/cpu-fallback.ts'
import {
  createLocalEngine,
  type Engine,
  type ExecutionProvider,
  loadedOrtLibrary,
  meteredEngine,
  parseExecutionProvider,
  probeExecutionProvider,
} from '../engine/index.ts'
import { Graph, type Value } from '../engine/ir.ts'
import { createNativeEngine } from '../engine/native-engine.ts'
import { encodeModel } from '../engine/onnx.ts'
import { placementOf } from '../engine/placement.ts'
import { mulberry32 } from '../envs/rng.ts'
import { type ModelConfig, PRESETS, toHuggingFaceConfig } from '../policy/config.ts'
import { generate } from '../policy/generate.ts'
import { initWeights } from '../policy/init.ts'
import { initLora, LORA_TARGETS, type LoraConfig } from '../policy/lora.ts'
import { meanNll, meanNllFeeds } from '../policy/losses.ts'
import { buildDecodeGraph, buildScoreGraph, buildTrainGraph } from '../policy/model.ts'
import { TRAINER_OPTIMIZER, Trainer } from '../policy/trainer.ts'
import { minMedian } from './min-median.ts'
import { smollm2Config } from './smollm2-shape.ts'

interface TrainShape {
  name: string
  config: ModelConfig
  /** LoRA over the baked base; absent: full fine-tuning. */
  lora?: LoraConfig
  /**
   * The native engine (engine/native-engine.ts, the check's `--addon`): what it keeps stays on the device. Its
   * name is the onnxruntime-node shape's with `, native`, which torch's side runs once for both.
   */
  engine?: 'native'
  B: number
  T: number
  steps: number
}

interface Plan {
  parity: { config: ModelConfig; train: { B: number; T: number }; score: { B: number; T: number }; decode: Decode }
  train: TrainShape[]
  decode: { config: ModelConfig; lora: LoraConfig; runs: Decode[] }
}

interface Decode {
  rows: number
  prompt: number
  tokens: number
}

const R16: LoraConfig = { rank: 16, alpha: 32, dropout: 0, targets: [...LORA_TARGETS] }
const TINY: ModelConfig = { ...PRESETS.tiny, maxPositions: 128 }
const SMOLLM2: ModelConfig = { ...smollm2Config(), maxPositions: 1024 }
const QWEN05: ModelConfig = { ...PRESETS['qwen2.5-0.5b'], maxPositions: 1024 }
const QWEN3: ModelConfig = { ...PRESETS['qwen2.5-3b'], maxPositions: 1024 }

export const PLANS: Record<string, Plan> = {
  smoke: {
    parity: { config: TINY, train: { B: 2, T: 32 }, score: { B: 2, T: 16 }, decode: { rows: 2, prompt: 8, tokens: 8 } },
    train: [
      { name: 'tiny LoRA r 4, 2 × 32', config: TINY, lora: { ...R16, rank: 4, alpha: 8 }, B: 2, T: 32, steps: 2 },
      { name: 'tiny full, 2 × 32', config: TINY, B: 2, T: 32, steps: 2 },
      { name: 'tiny full, 2 × 32, native', config: TINY, B: 2, T: 32, steps: 2, engine: 'native' },
    ],
    decode: { config: TINY, lora: { ...R16, rank: 4, alpha: 8 }, runs: [{ rows: 2, prompt: 8, tokens: 8 }] },
  },
  h200: {
    parity: {
      config: SMOLLM2,
      train: { B: 4, T: 256 },
      score: { B: 16, T: 64 },
      decode: { rows: 16, prompt: 16, tokens: 64 },
    },
    train: [
      { name: 'SmolLM2 LoRA r 16, 4 × 256', config: SMOLLM2, lora: R16, B: 4, T: 256, steps: 5 },
      { name: 'SmolLM2 LoRA r 16, 16 × 512', config: SMOLLM2, lora: R16, B: 16, T: 512, steps: 5 },
      { name: 'SmolLM2 full, 4 × 256', config: SMOLLM2, B: 4, T: 256, steps: 5 },
      { name: 'SmolLM2 full, 4 × 256, native', config: SMOLLM2, B: 4, T: 256, steps: 5, engine: 'native' },
      { name: 'Qwen2.5-0.5B full, 8 × 512, native', config: QWEN05, B: 8, T: 512, steps: 3, engine: 'native' },
      { name: 'Qwen2.5-0.5B LoRA r 16, 8 × 512', config: QWEN05, lora: R16, B: 8, T: 512, steps: 5 },
      { name: 'Qwen2.5-3B LoRA r 16, 4 × 512', config: QWEN3, lora: R16, B: 4, T: 512, steps: 3 },
    ],
    decode: {
      config: SMOLLM2,
      lora: R16,
      runs: [
        { rows: 16, prompt: 101, tokens: 64 },
        { rows: 64, prompt: 101, tokens: 64 },
      ],
    },
  },
}

const STEP = { lr: 1e-4, maxGradNorm: 1, weightDecay: 0.01 }
const MiB = (bytes: number) => bytes / 2 ** 20

/**
 * The product's engine on `ep`, the CPU-fallback guard off: the placement and guard steps report fallback, and the
 * timings are still measured where the guard would refuse a graph (with what it costs).
 */
function engineOn(ep: ExecutionProvider, threads: number, addon?: string): Engine {
  const config = { threads, executionProviders: [ep], cpuFallback: 'allow' } as const
  return addon ? createNativeEngine({ ...config, addon }) : createLocalEngine(config)
}

function randomIds(rng: { next(): number }, n: number, vocab: number): number[] {
  return Array.from({ length: n }, () => Math.floor(rng.next() * vocab))
}

/** Items of B random sequences of T tokens, one context token each (the rest scored). */
function items(config: ModelConfig, B: number, T: number, seed: number) {
  const rng = mulberry32(seed)
  return Array.from({ length: B }, () => {
    const ids = randomIds(rng, T, config.vocabSize)
    return { context: ids.slice(0, 1), response: ids.slice(1) }
  })
}

const relative = (a: number, b: number) => Math.abs(a - b) / Math.max(Math.abs(b), 1e-12)

async function parity(plan: Plan['parity'], ep: ExecutionProvider, threads: number) {
  const c = plan.config
  const weights = initWeights(c, mulberry32(1))
  const sides = await Promise.all(
    (['cpu', ep] as const).map(async (on) => {
      const engine = engineOn(on, threads)
      const trainer = new Trainer(engine, c, weights)
      return { engine, trainer }
    }),
  )
  try {
    const train = items(c, plan.train.B, plan.train.T, 2)
    const steps = []
    for (const { trainer } of sides) {
      // lr 0, no decay: the loss and the gradient norm of the same weights on both sides
      const model = await trainer.trainModel(meanNll)
      steps.push(
        await trainer.step(model, meanNllFeeds(trainer.model, train), { lr: 0, maxGradNorm: 1, weightDecay: 0 }),
      )
    }
    const [cpuStep, epStep] = steps as [(typeof steps)[0], (typeof steps)[0]]
    const scored = items(c, plan.score.B, plan.score.T, 3)
    const [cpuScore, epScore] = await Promise.all(sides.map((s) => s.trainer.model.score(scored)))
    let logprobMax = 0
    for (const [b, row] of (cpuScore ?? []).entries())
      for (const [t, x] of row.logprobs.entries())
        logprobMax = Math.max(logprobMax, Math.abs(x - (epScore?.[b]?.logprobs[t] as number)))
    const prompts = Array.from({ length: plan.decode.rows }, (_, i) =>
      randomIds(mulberry32(40 + i), plan.decode.prompt, c.vocabSize),
    )
    const decoded = []
    for (const { trainer } of sides)
      decoded.push(
        await generate(trainer.model, prompts, {
          maxNewTokens: plan.decode.tokens,
          temperature: 1,
          greedy: true,
          eosIds: [],
          rngs: prompts.map((_, i) => mulberry32(60 + i)),
        }),
      )
    const rows = []
    for (let b = 0; b < prompts.length; b++) {
      const cpuTokens = decoded[0]?.sequences[b]?.tokens ?? []
      const epTokens = decoded[1]?.sequences[b]?.tokens ?? []
      const at = cpuTokens.findIndex((t, i) => t !== epTokens[i])
      if (at < 0) {
        rows.push({ row: b, identical: true })
        continue
      }
      // the CPU's logits where the two first part: a near-tie there is rounding, not a wrong kernel
      const prefix = [...(prompts[b] as number[]), ...cpuTokens.slice(0, at)]
      const logits = (await sides[0]?.trainer.model.logits([prefix]))?.[0] as Float64Array
      const last = logits.subarray((prefix.length - 1) * c.vocabSize, prefix.length * c.vocabSize)
      const [top, second] = [...last].sort((x, y) => y - x)
      rows.push({ row: b, identical: false, firstDifference: at, topTwoGap: (top as number) - (second as number) })
    }
    return {
      loss: { cpu: cpuStep.loss, provider: epStep.loss, relative: relative(epStep.loss, cpuStep.loss) },
      gradNorm: {
        cpu: cpuStep.gradNorm,
        provider: epStep.gradNorm,
        relative: relative(epStep.gradNorm, cpuStep.gradNorm),
      },
      logprobMaxAbsDiff: logprobMax,
      decode: rows,
      met: {
        loss: relative(epStep.loss, cpuStep.loss) <= 1e-3,
        gradNorm: relative(epStep.gradNorm, cpuStep.gradNorm) <= 1e-3,
        logprobs: logprobMax <= 1e-3,
        tokens: rows.every((r) => r.identical || (r.topTwoGap as number) < 1e-3),
      },
    }
  } finally {
    await Promise.all(sides.map((s) => s.engine.close()))
  }
}

async function trainShape(shape: TrainShape, ep: ExecutionProvider, threads: number, addon?: string) {
  if (shape.engine === 'native' && !addon) throw new Error('a native-engine shape needs --addon (the built addon)')
  const engine = meteredEngine(engineOn(ep, threads, shape.engine === 'native' ? addon : undefined))
  try {
    const weights = initWeights(shape.config, mulberry32(1))
    const lora = shape.lora
      ? { config: shape.lora, adapters: initLora(shape.config, shape.lora, mulberry32(2)) }
      : undefined
    const trainer = new Trainer(engine, shape.config, weights, lora ? { lora } : {})
    const feeds = meanNllFeeds(trainer.model, items(shape.config, shape.B, shape.T, 3))
    let started = performance.now()
    const model = await trainer.trainModel(meanNll)
    const first = await trainer.step(model, feeds, STEP)
    const firstSeconds = (performance.now() - started) / 1000
    const seconds: number[] = []
    const losses = [first.loss]
    engine.reset()
    for (let i = 0; i < shape.steps; i++) {
      started = performance.now()
      losses.push((await trainer.step(model, feeds, STEP)).loss)
      seconds.push((performance.now() - started) / 1000)
    }
    const t = engine.traffic
    // what the engine keeps (the trained tensors and AdamW's two moments) is read by every step and written back
    // in place: host memory for onnxruntime-node, so on a device all of it crosses both ways; the native engine
    // keeps it where the model runs, so none of it crosses
    const stateBytes = trainer.trainedSpecs().reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0) * 4 * 3
    const crossing = shape.engine === 'native' ? 0 : stateBytes
    const perStep = (x: number) => x / shape.steps
    return {
      parameters: {
        trained: stateBytes / 12,
        base: shape.lora ? [...weights.values()].reduce((n, w) => n + w.length, 0) : 0,
      },
      firstStepSeconds: firstSeconds,
      stepSeconds: minMedian(seconds),
      tokensPerSecond: (shape.B * shape.T) / minMedian(seconds).median,
      losses,
      mibPerStep: {
        fed: MiB(perStep(t.fedBytes)),
        fetched: MiB(perStep(t.fetchedBytes)),
        keptStateEachWay: MiB(crossing),
        hostDeviceTotal: MiB(perStep(t.fedBytes + t.fetchedBytes) + 2 * crossing),
      },
      peakRssMiB: process.resourceUsage().maxRSS / 1024,
    }
  } finally {
    await engine.close()
  }
}

async function decodeRuns(plan: Plan['decode'], ep: ExecutionProvider, threads: number) {
  const engine = meteredEngine(engineOn(ep, threads))
  try {
    const c = plan.config
    const trainer = new Trainer(engine, c, initWeights(c, mulberry32(1)), {
      lora: { config: plan.lora, adapters: initLora(c, plan.lora, mulberry32(2)) },
    })
    const results = []
    for (const run of plan.runs) {
      const prompts = Array.from({ length: run.rows }, (_, i) => randomIds(mulberry32(80 + i), run.prompt, c.vocabSize))
      const options = {
        maxNewTokens: run.tokens,
        temperature: 1,
        greedy: true,
        eosIds: [],
        rngs: prompts.map((_, i) => mulberry32(90 + i)),
      }
      await generate(trainer.model, prompts, { ...options, maxNewTokens: 2 }) // sessions made
      engine.reset()
      const started = performance.now()
      const out = await generate(trainer.model, prompts, options)
      const seconds = (performance.now() - started) / 1000
      const t = engine.traffic
      // the KV cache is kept in host memory: each step reads it (rows × capacity) and writes its new columns
      const cacheBytes = run.rows * c.numLayers * 2 * c.numKvHeads * c.headDim * (run.prompt + run.tokens) * 4
      results.push({
        ...run,
        seconds,
        tokensPerSecond: out.stats.newTokens / seconds,
        runs: t.runs,
        mibPerStep: {
          fed: MiB(t.fedBytes / t.runs),
          fetched: MiB(t.fetchedBytes / t.runs),
          kvCacheRead: MiB(cacheBytes),
        },
      })
    }
    return results
  } finally {
    await engine.close()
  }
}

/** A plan for bench/gpu-torch.py: the same shapes, with Hugging Face config fields. */
export function torchPlan(plan: Plan): Record<string, unknown> {
  const hf = (c: ModelConfig) => ({ ...toHuggingFaceConfig(c, { eosIds: [0] }), qkv_bias: c.qkvBias })
  return {
    train: plan.train
      .filter((s) => s.engine === undefined)
      .map((s) => ({
        name: s.name,
        config: hf(s.config),
        lora: s.lora ?? null,
        B: s.B,
        T: s.T,
        steps: s.steps,
      })),
    decode: { config: hf(plan.decode.config), lora: plan.decode.lora, runs: plan.decode.runs },
  }
}

/**
 * Where ORT puts each node of the product's graphs (a LoRA train step with the optimizer, score, decode prefill and
 * step) on this provider: the nodes it leaves on the CPU, by op, which every run then copies across (docs/design.md §14).
 */
async function placement(plan: Plan, ep: ExecutionProvider) {
  const c = plan.decode.config
  const lora = plan.decode.lora
  const graphs = {
    train: buildTrainGraph(c, meanNll, 'float32', { lora }, TRAINER_OPTIMIZER),
    score: buildScoreGraph(c, 'float32', { lora }),
    prefill: buildDecodeGraph(c, 'float32', 'in-graph', { prefill: true, lora }),
    step: buildDecodeGraph(c, 'float32', 'in-graph', { lora }),
  }
  const out: Record<string, unknown> = {}
  for (const [name, graph] of Object.entries(graphs)) {
    const model = encodeModel(graph)
    const placed = await placementOf(model, [ep])
    const cpu = placed.providers.CPUExecutionProvider
    const ops: Record<string, number> = {}
    for (const node of cpu?.nodes ?? []) ops[node.op] = (ops[node.op] ?? 0) + 1
    const refused = ep === 'cpu' ? [] : refusedCpuNodes(await readModelProto(model), placed)
    out[name] = {
      nodes: Object.fromEntries(Object.entries(placed.providers).map(([p, v]) => [p, v.count])),
      ...(ep === 'cpu' ? {} : { cpuOps: ops, refused: refused.map((n) => `${n.op} (${n.name})`) }),
    }
  }
  return out
}

/**
 * The guard of a product engine on `ep` (engine/cpu-fallback.ts) against a model with an op no device provider has
 * a kernel for (Det): it must refuse to load it, naming the op.
 */
async function guard(ep: ExecutionProvider) {
  if (ep === 'cpu') return { applies: false, why: 'a CPU session has nothing to fall back from' }
  const graph = new Graph('guard')
  const op = createBuilder(graph)
  const x = op.input('x', 'float32', [2, 2])
  const [det] = graph.addNode(null, 'Det', '', [op.Abs(x)], {}, [{ dtype: 'float32', shape: [] }])
  op.output(op.Add(det as Value, x), 'y')
  const engine = createLocalEngine({ threads: 1, executionProviders: [ep, 'cpu'] })
  try {
    await engine.load(encodeModel(graph))
    return { applies: true, refused: false, message: 'loaded: the guard did not fire' }
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    return { applies: true, refused: error instanceof CpuFallbackError, namesDet: /\bDet\b/.test(message), message }
  } finally {
    await engine.close()
  }
}

function gpuName(): string | undefined {
  try {
    return execFileSync('nvidia-smi', ['--query-gpu=name,driver_version,memory.total', '--format=csv,noheader'], {
      encoding: 'utf8',
    }).trim()
  } catch {
    return undefined
  }
}

/** The check, with this process's command line (bench/gpu.ts, or this file run or bundled as the entry). */
export async function runCheck(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'execution-provider': { type: 'string', default: 'cpu' },
      plan: { type: 'string', default: 'smoke' },
      out: { type: 'string', default: 'gpu-check.json' },
      threads: { type: 'string', default: '2' },
      only: { type: 'string' },
      'write-plan': { type: 'string' },
      addon: { type: 'string' },
    },
  })
  const ep = parseExecutionProvider(values['execution-provider'])
  const plan = PLANS[values.plan]
  if (!plan) throw new Error(`--plan ${Object.keys(PLANS).join('|')}, got ${values.plan}`)
  if (values['write-plan']) {
    await writeFile(values['write-plan'], `${JSON.stringify(torchPlan(plan), null, 2)}\n`)
    return
  }
  const threads = Number(values.threads)
  const only = values.only?.split(',')
  const report: Record<string, unknown> = {
    date: new Date().toISOString(),
    provider: values['execution-provider'],
    plan: values.plan,
    threads,
    nvidiaTf32Override: process.env.NVIDIA_TF32_OVERRIDE ?? null,
    steps: {},
  }
  const steps = report.steps as Record<string, unknown>
  const record = async (name: string, run: () => Promise<unknown>) => {
    if (only && !only.some((o) => name.startsWith(o))) return
    const started = performance.now()
    process.stdout.write(`gpu-check: ${name} ...\n`)
    try {
      steps[name] = { ...((await run()) as object), wallSeconds: (performance.now() - started) / 1000 }
    } catch (error) {
      steps[name] = { error: error instanceof Error ? error.message : String(error) }
    }
    await writeFile(values.out, `${JSON.stringify(report, null, 2)}\n`)
    process.stdout.write(`gpu-check: ${name}: ${JSON.stringify(steps[name]).slice(0, 300)}\n`)
  }
  await record('environment', async () => {
    await probeExecutionProvider(ep)
    return {
      node: process.version,
      nodeBinary: process.execPath,
      ortLibrary: loadedOrtLibrary() ?? null,
      gpu: gpuName() ?? null,
    }
  })
  if ((steps.environment as { error?: string } | undefined)?.error) return
  await record('placement', () => placement(plan, ep))
  await record('guard', () => guard(ep))
  await record('parity', () => parity(plan.parity, ep, threads))
  for (const shape of plan.train)
    await record(`train: ${shape.name}`, () => trainShape(shape, ep, threads, values.addon))
  await record('decode', async () => ({ runs: await decodeRuns(plan.decode, ep, threads) }))
}

if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) await runCheck()
