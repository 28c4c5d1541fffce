// The GPU check's two sides put together: seedflow's (bench/gpu-check.ts) and torch's (bench/gpu-torch.py) on the
// same plan and device, as bench/results/gpu.json and a markdown table (torch seconds ÷ seedflow seconds, medians:
// > 1 means seedflow is faster), printed for docs/benchmarks.md §6.9.
//   node --import tsx bench/gpu-report.ts gpu.json torch.json [--out bench/results/gpu.json]
import { readFile, writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

interface Side {
  date: string
  steps: Record<string, Record<string, unknown> & { error?: string }>
}

interface TrainFigures {
  stepSeconds?: { median: number; min: number }
  mibPerStep?: { hostDeviceTotal: number }
  peakDeviceMiB?: number
}

interface DecodeRun {
  rows: number
  prompt: number
  tokens: number
  seconds: number
}

const OUT = fileURLToPath(new URL('results/gpu.json', import.meta.url))

/** One row per figure both sides have: train shapes by step name, decode runs by their shape. */
export function compare(ours: Side, torch: Side): Array<Record<string, string | number | null>> {
  const rows: Array<Record<string, string | number | null>> = []
  for (const [name, step] of Object.entries(ours.steps)) {
    if (!name.startsWith('train: ')) continue
    const a = step as TrainFigures & { error?: string }
    // a native-engine shape is paired with torch's run of the same shape (its name without `, native`)
    const b = torch.steps[name.replace(/, native$/, '')] as (TrainFigures & { error?: string }) | undefined
    rows.push({
      figure: `${name.slice('train: '.length)}: trainer.step`,
      seedflow: a.stepSeconds?.median ?? null,
      torch: b?.stepSeconds?.median ?? null,
      ratio: a.stepSeconds && b?.stepSeconds ? b.stepSeconds.median / a.stepSeconds.median : null,
      hostDeviceMiBPerStep: a.mibPerStep?.hostDeviceTotal ?? null,
      note: a.error ?? b?.error ?? null,
    })
  }
  const decode = (side: Side) => ((side.steps.decode as { runs?: DecodeRun[] } | undefined)?.runs ?? []) as DecodeRun[]
  for (const run of decode(ours)) {
    const other = decode(torch).find((r) => r.rows === run.rows && r.prompt === run.prompt && r.tokens === run.tokens)
    rows.push({
      figure: `decode ${run.rows} × (${run.prompt} + ${run.tokens})`,
      seedflow: run.seconds,
      torch: other?.seconds ?? null,
      ratio: other ? other.seconds / run.seconds : null,
      hostDeviceMiBPerStep: null,
      note: null,
    })
  }
  return rows
}

export function table(rows: ReturnType<typeof compare>): string {
  const f = (x: unknown, digits = 3) => (typeof x === 'number' ? x.toFixed(digits) : '–')
  return [
    '| figure | seedflow s (median) | torch s (median) | torch ÷ seedflow | host ↔ device MiB a step | note |',
    '| --- | ---: | ---: | ---: | ---: | --- |',
    ...rows.map(
      (r) =>
        `| ${r.figure} | ${f(r.seedflow)} | ${f(r.torch)} | ${typeof r.ratio === 'number' ? `${r.ratio.toFixed(2)}×` : '–'} | ` +
        `${f(r.hostDeviceMiBPerStep, 1)} | ${r.note ?? ''} |`,
    ),
  ].join('\n')
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { out: { type: 'string', default: OUT } },
  })
  const [oursFile, torchFile] = positionals
  if (!oursFile || !torchFile) throw new Error('usage: gpu-report.ts gpu.json torch.json [--out FILE]')
  const ours = JSON.parse(await readFile(oursFile, 'utf8')) as Side
  const torch = JSON.parse(await readFile(torchFile, 'utf8')) as Side
  const rows = compare(ours, torch)
  await writeFile(values.out, `${JSON.stringify({ seedflow: ours, torch, compare: rows }, null, 2)}\n`)
  process.stdout.write(`${table(rows)}\n\nwrote ${values.out}\n`)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main()
