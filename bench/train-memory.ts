// npm run bench:engine -- --memory: peak RSS of one train step (graph + clip + AdamW) per graph layout, each
// configuration alone in its own child process, PyTorch's same step beside it; plus how far the chunked
// log-probs are from the unchunked ones in float32. Written to bench/results/engine.json `memory` and
// bench/results/engine-memory.md (SEEDFLOW_BENCH_OUT=<file>.json: there and <file>-memory.md instead;
// SEEDFLOW_MEMORY_CASES: a JSON array of cases to run instead of CASES). Not run in CI.
// A step is `trainer.step` (policy/trainer.ts): one run whose graph holds the clipping and AdamW (the optimizer is
// inside the graph now), the weights and AdamW's moments kept in the engine.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { homedir, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createLocalEngine } from '../engine/index.ts'
import { mulberry32 } from '../envs/rng.ts'
import { encodeCheckpoint } from '../policy/checkpoint.ts'
import { type ModelConfig, PRESETS } from '../policy/config.ts'
import { initWeights } from '../policy/init.ts'
import { meanNll } from '../policy/losses.ts'
import { defaultLogitChunks, type GraphOptions, IO } from '../policy/model.ts'
import { PolicyModel } from '../policy/policy-model.ts'
import { Trainer } from '../policy/trainer.ts'
import { smollm2Config } from './smollm2-shape.ts'

const THREADS = Number(process.env.SEEDFLOW_THREADS ?? 2)
const say = (line: string) => process.stdout.write(`${line}\n`)

const SHAPES: Record<string, () => ModelConfig> = {
  bench: () => PRESETS.bench,
  smollm2: smollm2Config,
  'qwen2.5-0.5b': () => PRESETS['qwen2.5-0.5b'],
}

interface Case {
  shape: string
  B: number
  T: number
  side: 'seedflow' | 'torch'
  graph?: GraphOptions
  /** ORT's memory arena (seedflow side); off runs with MALLOC_MMAP_THRESHOLD_=65536. */
  arena?: boolean
  /** trainer.step runs (the first allocates AdamW's moments); 0: one run of the train graph without the optimizer. */
  steps: number
}

const CASES: Case[] = [
  { shape: 'smollm2', B: 4, T: 256, side: 'torch', steps: 2 },
  { shape: 'smollm2', B: 4, T: 256, side: 'seedflow', graph: { logitChunks: 1 }, steps: 2 },
  { shape: 'smollm2', B: 4, T: 256, side: 'seedflow', graph: {}, steps: 2 },
  { shape: 'smollm2', B: 4, T: 256, side: 'seedflow', graph: {}, arena: false, steps: 2 },
  { shape: 'smollm2', B: 4, T: 256, side: 'seedflow', graph: { recomputeLayers: true }, steps: 2 },
  { shape: 'smollm2', B: 4, T: 256, side: 'seedflow', graph: { recomputeLayers: true }, arena: false, steps: 2 },
  { shape: 'smollm2', B: 8, T: 512, side: 'torch', steps: 1 },
  { shape: 'smollm2', B: 8, T: 512, side: 'seedflow', graph: { logitChunks: 1 }, steps: 1 },
  { shape: 'smollm2', B: 8, T: 512, side: 'seedflow', graph: {}, steps: 1 },
  { shape: 'smollm2', B: 8, T: 512, side: 'seedflow', graph: { recomputeLayers: true }, steps: 1 },
  { shape: 'smollm2', B: 8, T: 512, side: 'seedflow', graph: { recomputeLayers: true }, arena: false, steps: 1 },
  { shape: 'qwen2.5-0.5b', B: 4, T: 512, side: 'seedflow', graph: { logitChunks: 1 }, steps: 0 },
  { shape: 'qwen2.5-0.5b', B: 4, T: 512, side: 'seedflow', graph: {}, steps: 0 },
  { shape: 'qwen2.5-0.5b', B: 4, T: 512, side: 'seedflow', graph: { recomputeLayers: true }, steps: 0 },
]

function shapeConfig(shape: string): ModelConfig {
  const make = SHAPES[shape]
  if (!make) throw new Error(`unknown shape ${shape} (${Object.keys(SHAPES).join(', ')})`)
  return make()
}

function label(c: Case): string {
  if (c.side === 'torch') return 'torch'
  const chunks = c.graph?.logitChunks ?? defaultLogitChunks(shapeConfig(c.shape))
  return [
    chunks === 1 ? 'unchunked' : `${chunks} logit chunks`,
    c.graph?.recomputeLayers ? 'layers recomputed' : null,
    c.arena === false ? 'no arena' : null,
  ]
    .filter(Boolean)
    .join(', ')
}

function rows(rng: { next(): number }, B: number, T: number, V: number): number[][] {
  return Array.from({ length: B }, () => Array.from({ length: T }, () => 3 + Math.floor(rng.next() * (V - 3))))
}

/** In a child: the case alone, then its peak RSS. */
async function runCase(c: Case): Promise<Record<string, unknown>> {
  const config = shapeConfig(c.shape)
  const weights = initWeights(config, mulberry32(2))
  const ids = rows(mulberry32(3), c.B, c.T, config.vocabSize)
  if (c.side === 'torch') {
    const folder = await mkdtemp(join(tmpdir(), 'seedflow-memory-'))
    for (const [name, bytes] of Object.entries(encodeCheckpoint({ config, weights, eosIds: [] })))
      await writeFile(join(folder, name), bytes)
    weights.clear() // the torch child holds the weights, not this one
    try {
      return await torchPeak(folder, ids, c.steps)
    } finally {
      await rm(folder, { recursive: true, force: true })
    }
  }
  const engine = createLocalEngine({ threads: THREADS, memoryArena: c.arena ?? true })
  const trainer = new Trainer(engine, config, weights, c.graph ? { graph: c.graph } : {})
  const model = trainer.model
  const batch = model.tokenBatch(
    ids.map((row) => ({ context: row.slice(0, 1), response: row.slice(1) })),
    1,
  )
  // one train session per case: with the optimizer inside for steps, without it for the lone graph run
  const train = c.steps === 0 ? await model.gradientModel(meanNll) : await trainer.trainModel(meanNll)
  const feeds = { ...batch.feeds, mask: model.float([c.B, c.T], batch.responseMask) }
  const started = performance.now()
  let loss = Number.NaN
  if (c.steps === 0) {
    const out = await engine.run(train, feeds, { kept: await trainer.kept(), fetches: [IO.loss] })
    loss = Number(out[IO.loss]?.data[0])
  } else
    for (let i = 0; i < c.steps; i++)
      loss = (await trainer.step(train, feeds, { lr: 1e-4, maxGradNorm: 1, weightDecay: 0.01 })).loss
  const seconds = (performance.now() - started) / 1000
  await engine.close()
  return { peakRssMiB: process.resourceUsage().maxRSS / 1024, loss, seconds }
}

function torchPeak(folder: string, ids: number[][], steps: number): Promise<Record<string, unknown>> {
  const python = [
    process.env.SEEDFLOW_TORCH_PYTHON,
    join(homedir(), '.cache/seedflow/venv-bench/bin/python'),
    join(homedir(), '.cache/seedflow/venv-ref/bin/python'),
  ].find((p): p is string => !!p && existsSync(p))
  if (!python) throw new Error('no Python with torch: run bench/compare/make-venv.sh')
  const script = fileURLToPath(new URL('./compare/torch_reference.py', import.meta.url))
  const child = spawn(python, [script], { env: { ...process.env, SEEDFLOW_THREADS: String(THREADS) } })
  child.stderr.on('data', (d: Buffer) => process.stderr.write(`[torch] ${d}`))
  const messages = [
    { cmd: 'load', folder },
    // torch trains on ids[:, :-1] → ids[:, 1:]: one more column gives it the same B × T tokens
    ...Array.from({ length: steps }, () => ({ cmd: 'train', ids: ids.map((r) => [...r, 3]), optimizer: true })),
    { cmd: 'rss' },
  ]
  return new Promise((done, fail) => {
    let buffer = ''
    const replies: Record<string, unknown>[] = []
    child.stdout.on('data', (d: Buffer) => {
      buffer += d.toString()
      let at = buffer.indexOf('\n')
      while (at >= 0) {
        replies.push(JSON.parse(buffer.slice(0, at)) as Record<string, unknown>)
        buffer = buffer.slice(at + 1)
        at = buffer.indexOf('\n')
      }
    })
    child.once('exit', () => {
      const failed = replies.find((r) => r.error)
      if (failed || replies.length < messages.length) return fail(new Error(`torch: ${failed?.error ?? 'exited'}`))
      const last = replies[replies.length - 2] as { loss: number; seconds: number }
      done({ peakRssMiB: replies[replies.length - 1]?.peak_rss_mib, loss: last.loss })
    })
    for (const m of messages) child.stdin.write(`${JSON.stringify(m)}\n`)
    child.stdin.end()
  })
}

/** In a child: float32 token log-probs of SmolLM2's shape at 4 × 256, chunked vs unchunked. */
async function chunkGap(): Promise<Record<string, unknown>> {
  const config = shapeConfig('smollm2')
  const weights = initWeights(config, mulberry32(2))
  const engine = createLocalEngine({ threads: THREADS })
  const ids = rows(mulberry32(3), 4, 256, config.vocabSize)
  const out: Float32Array[] = []
  const trainer = new Trainer(engine, config, weights)
  for (const logitChunks of [1, defaultLogitChunks(config)]) {
    // the two layouts' graphs over the same kept weights
    const model = new PolicyModel(engine, config, trainer, { graph: { logitChunks } })
    const batch = model.tokenBatch(
      ids.map((row) => ({ context: row.slice(0, 1), response: row.slice(1) })),
      1,
    )
    const scored = await engine.run(await model.scoreModel(), batch.feeds, { kept: await trainer.kept() })
    out.push(scored[IO.tokenLogprobs]?.data as Float32Array)
  }
  await engine.close()
  const [a, b] = out as [Float32Array, Float32Array]
  let worst = 0
  a.forEach((x, i) => {
    worst = Math.max(worst, Math.abs(x - (b[i] as number)))
  })
  return { maxAbsLogprobDifference: worst, tokens: a.length }
}

async function child(args: string[], extraEnv: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const dir = await mkdtemp(join(tmpdir(), 'seedflow-memory-out-'))
  const out = join(dir, 'out.json')
  try {
    const code = await new Promise<number | null>((done) => {
      const p = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), ...args, out], {
        stdio: 'inherit',
        env: { ...process.env, ...extraEnv },
      })
      p.once('exit', done)
    })
    if (code !== 0) return { failed: `child exited with ${code}` }
    return JSON.parse(await readFile(out, 'utf8')) as Record<string, unknown>
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

export async function trainMemory(): Promise<void> {
  const started = Date.now()
  const memory: Record<string, unknown> = { threads: THREADS, loadAverageBefore: loadavg() }
  memory.chunkedLogprobs = await child(['--gap'])
  say(`chunked vs unchunked log-probs (float32, SmolLM2 shape 4×256): ${JSON.stringify(memory.chunkedLogprobs)}`)
  const results: Record<string, unknown>[] = []
  const cases = process.env.SEEDFLOW_MEMORY_CASES ? (JSON.parse(process.env.SEEDFLOW_MEMORY_CASES) as Case[]) : CASES
  for (const c of cases) {
    const r = await child(['--case', JSON.stringify(c)], c.arena === false ? { MALLOC_MMAP_THRESHOLD_: '65536' } : {})
    const row = { shape: c.shape, B: c.B, T: c.T, layout: label(c), steps: c.steps, ...r }
    results.push(row)
    say(`${c.shape} ${c.B}×${c.T} ${row.layout}: ${JSON.stringify(r)}`)
  }
  memory.cases = results
  memory.loadAverageAfter = loadavg()
  memory.measuredAt = new Date().toISOString()
  memory.seconds = (Date.now() - started) / 1000
  const path = process.env.SEEDFLOW_BENCH_OUT ?? fileURLToPath(new URL('./results/engine.json', import.meta.url))
  const md = `${path.replace(/\.json$/, '')}-memory.md`
  const existing = existsSync(path) ? (JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>) : {}
  await writeFile(path, `${JSON.stringify({ ...existing, memory }, null, 2)}\n`)
  await writeFile(md, markdown(memory, results))
  say(`wrote ${path} (memory) and ${md} in ${memory.seconds} s`)
}

function markdown(memory: Record<string, unknown>, results: Record<string, unknown>[]): string {
  const gap = memory.chunkedLogprobs as { maxAbsLogprobDifference?: number; tokens?: number }
  const [b, a] = [memory.loadAverageBefore, memory.loadAverageAfter] as number[][]
  return [
    '# Peak memory of one train step',
    '',
    `\`npm run bench:engine -- --memory\`, ${memory.threads} threads, float32, random weights; each row alone in its own process; measured ${memory.measuredAt}.`,
    `Load average before ${b?.map((x) => x.toFixed(2)).join(' ')}, after ${a?.map((x) => x.toFixed(2)).join(' ')}.`,
    'Steps: `trainer.step`, one run of the train graph with global-norm clipping and AdamW inside (the first allocates the moments in the engine); 0 steps: one run of the train graph without the optimizer. Seconds: the whole child, indicative only (other work shared the machine).',
    `Chunked vs unchunked per-token log-probs (SmolLM2 shape, 4×256, float32): max |difference| ${gap.maxAbsLogprobDifference} over ${gap.tokens} tokens.`,
    '',
    '| shape | batch | layout | steps | peak RSS (GiB) | seconds |',
    '| --- | --- | --- | ---: | ---: | ---: |',
    ...results.map((r) => {
      const rss = typeof r.peakRssMiB === 'number' ? (r.peakRssMiB / 1024).toFixed(2) : String(r.failed ?? '')
      const seconds = typeof r.seconds === 'number' ? r.seconds.toFixed(1) : ''
      return `| ${r.shape} | ${r.B}×${r.T} | ${r.layout} | ${r.steps} | ${rss} | ${seconds} |`
    }),
    '',
  ].join('\n')
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [mode, arg, out] = process.argv.slice(2)
  if (mode === '--case') await writeFile(out as string, JSON.stringify(await runCase(JSON.parse(arg as string))))
  else if (mode === '--gap') await writeFile(arg as string, JSON.stringify(await chunkGap()))
}
