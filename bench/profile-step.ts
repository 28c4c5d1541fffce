// npm run bench:engine -- --profile [smollm2|bench]: ORT's own profile of one train step (after a warm-up run),
// kernel time per op type and the MatMul share, written to bench/results/engine.json `profile` (SEEDFLOW_BENCH_OUT:
// that file instead). The step is `trainer.step`: one run whose graph holds the clipping and AdamW too (the optimizer
// is inside the graph now), so its kernels are in the profile beside the forward and backward ones. Not in CI.
import { existsSync } from 'node:fs'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createLocalEngine } from '../engine/index.ts'
import { mulberry32 } from '../envs/rng.ts'
import { type ModelConfig, PRESETS } from '../policy/config.ts'
import { initWeights } from '../policy/init.ts'
import { meanNll } from '../policy/losses.ts'
import { Trainer } from '../policy/trainer.ts'
import { smollm2Config } from './smollm2-shape.ts'

const SHAPES: Record<string, { config: () => ModelConfig; B: number; T: number }> = {
  bench: { config: () => PRESETS.bench, B: 16, T: 256 },
  smollm2: {
    config: smollm2Config,
    B: 4,
    T: 256,
  },
}

interface ProfileEvent {
  cat?: string
  name: string
  dur: number
  args?: {
    op_name?: string
    input_type_shape?: Array<Record<string, number[]>>
    output_type_shape?: Array<Record<string, number[]>>
  }
}

/** MatMul kernels grouped by their operand shapes: time, count and GFLOP/s of each group, slowest first. */
function matmulGroups(events: ProfileEvent[]) {
  const groups = new Map<string, { op: string; shapes: string; ms: number; count: number; flops: number }>()
  for (const e of events) {
    const op = e.args?.op_name ?? ''
    if (!op.includes('MatMul')) continue
    const [a, b] = (e.args?.input_type_shape ?? []).map((t) => Object.values(t)[0] ?? [])
    const out = Object.values(e.args?.output_type_shape?.[0] ?? {})[0] ?? []
    if (!a || !b || out.length === 0) continue
    const size = (dims: number[]) => dims.reduce((x, y) => x * y, 1)
    // out = batch·M·N and A = batch·M·K, so K = |A|·N / |out| (2-D B broadcast over A's batch included)
    const k = (size(a) * (out[out.length - 1] as number)) / size(out)
    const shapes = `${JSON.stringify(a)} × ${JSON.stringify(b)} → ${JSON.stringify(out)}`
    const key = `${op} ${shapes}`
    const g = groups.get(key) ?? { op, shapes, ms: 0, count: 0, flops: 0 }
    g.ms += e.dur / 1000
    g.count += 1
    g.flops += 2 * size(out) * k
    groups.set(key, g)
  }
  return [...groups.values()]
    .sort((x, y) => y.ms - x.ms)
    .map((g) => ({ op: g.op, shapes: g.shapes, ms: g.ms, count: g.count, gflops: g.flops / g.ms / 1e6 }))
}

export async function profileStep(shape = 'smollm2'): Promise<void> {
  const plan = SHAPES[shape]
  if (!plan) throw new Error(`unknown shape ${shape} (${Object.keys(SHAPES).join(', ')})`)
  const c = plan.config()
  const dir = await mkdtemp(join(tmpdir(), 'seedflow-profile-'))
  const load = loadavg()
  try {
    const engine = createLocalEngine({
      threads: Number(process.env.SEEDFLOW_THREADS ?? 2),
      profilePrefix: join(dir, 'p'),
    })
    const trainer = new Trainer(engine, c, initWeights(c, mulberry32(2)))
    const model = trainer.model
    const rng = mulberry32(3)
    const items = Array.from({ length: plan.B }, () => {
      const row = Array.from({ length: plan.T }, () => 3 + Math.floor(rng.next() * (c.vocabSize - 3)))
      return { context: row.slice(0, 1), response: row.slice(1) }
    })
    const batch = model.tokenBatch(items, 1)
    const train = await trainer.trainModel(meanNll)
    const feeds = { ...batch.feeds, mask: model.float([plan.B, plan.T], batch.responseMask) }
    for (let i = 0; i < 2; i++) await trainer.step(train, feeds, { lr: 1e-4, maxGradNorm: 1 })
    await engine.close() // writes the profile
    const file = (await readdir(dir)).find((f) => f.endsWith('.json'))
    if (!file) throw new Error('ORT wrote no profile')
    const events = JSON.parse(await readFile(join(dir, file), 'utf8')) as ProfileEvent[]
    const kernels = events.filter((e) => e.cat === 'Node' && e.name.endsWith('_kernel_time'))
    // two runs were profiled: keep the second (the first one pays the memory arena's growth)
    const second = kernels.slice(kernels.length / 2)
    const byOp = new Map<string, number>()
    for (const e of second) byOp.set(e.args?.op_name ?? '?', (byOp.get(e.args?.op_name ?? '?') ?? 0) + e.dur)
    const total = [...byOp.values()].reduce((a, b) => a + b, 0)
    const matmul = [...byOp].filter(([k]) => k.includes('MatMul') || k === 'Gemm').reduce((a, [, v]) => a + v, 0)
    const ops = [...byOp].sort((a, b) => b[1] - a[1]).map(([op, us]) => ({ op, ms: us / 1000, share: us / total }))
    const matmuls = matmulGroups(second)
    const profile = {
      shape,
      B: plan.B,
      T: plan.T,
      step: 'trainer.step: loss, gradients, global-norm clipping and AdamW in one run',
      kernelSeconds: total / 1e6,
      matmulShare: matmul / total,
      ops: ops.slice(0, 15),
      /** The MatMul kernels by operand shapes (FusedMatMul: ORT's fusion of a Transpose into the product). */
      matmuls: matmuls.slice(0, 16),
      loadAverageBefore: load,
      loadAverageAfter: loadavg(),
      measuredAt: new Date().toISOString(),
    }
    process.stdout.write(
      `${shape} ${plan.B}×${plan.T}: kernel time ${profile.kernelSeconds.toFixed(2)} s, MatMul ${(100 * profile.matmulShare).toFixed(1)}%\n`,
    )
    for (const o of ops.slice(0, 12))
      process.stdout.write(`  ${o.op.padEnd(24)} ${o.ms.toFixed(0).padStart(7)} ms ${(100 * o.share).toFixed(1)}%\n`)
    process.stdout.write('  MatMul kernels by operand shapes (time, count, GFLOP/s):\n')
    for (const g of matmuls.slice(0, 16))
      process.stdout.write(
        `    ${g.ms.toFixed(0).padStart(6)} ms ${String(g.count).padStart(4)}× ${g.gflops.toFixed(0).padStart(4)}  ${g.op} ${g.shapes}\n`,
      )
    const path = process.env.SEEDFLOW_BENCH_OUT ?? fileURLToPath(new URL('./results/engine.json', import.meta.url))
    const existing = existsSync(path) ? (JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>) : {}
    const profiles = { ...((existing.profile as Record<string, unknown>) ?? {}), [shape]: profile }
    await writeFile(path, `${JSON.stringify({ ...existing, profile: profiles }, null, 2)}\n`)
    process.stdout.write(`wrote ${path} (profile)\n`)
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}
