// npm run bench:serve -- <checkpoint folder> [--threads n] [--context n] [--max-tokens n] [--repeats n]
// Starts `seedflow serve` on the checkpoint (the product itself, as a user runs it), then runs 1, 4 and 16
// concurrent openai-client streams of fixed prompts, the concurrency levels interleaved within each repeat, and
// writes aggregate tokens/s and time to first token (min and median over repeats), the server's decode steps
// and mean batch occupancy, and the load average before and after, to bench/results/serve.json and serve.md.
import { spawn } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { cpus, loadavg } from 'node:os'
import { basename } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import OpenAI from 'openai'

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    threads: { type: 'string', default: String(cpus().length) },
    context: { type: 'string', default: '512' },
    'max-tokens': { type: 'string', default: '64' },
    repeats: { type: 'string', default: '3' },
  },
})
const folder = positionals[0]
if (!folder) {
  process.stderr.write('usage: npm run bench:serve -- <checkpoint folder> [--threads n] [--context n] [--repeats n]\n')
  process.exit(2)
}
const threads = Number(values.threads)
const maxTokens = Number(values['max-tokens'])
const repeats = Number(values.repeats)
const LEVELS = [1, 4, 16] as const
const PROMPTS = [
  'Write a short poem about the sea.',
  'Explain what a hash table is.',
  'Give three tips for learning a language.',
  'Describe a sunrise over the mountains.',
  'What makes a good cup of coffee?',
  'Summarize the plot of a heist movie.',
  'List some uses of a paperclip.',
  'Why is the sky blue?',
]
const say = (line: string) => process.stdout.write(`${line}\n`)
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}

const bin = fileURLToPath(new URL('../cli/bin.js', import.meta.url))
const loadBefore = loadavg()
const server = spawn(
  process.execPath,
  [
    bin,
    'serve',
    folder,
    '--port',
    '0',
    '--threads',
    String(threads),
    '--context',
    values.context,
    '--grace-period',
    '5',
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
)
const url = await new Promise<string>((resolve, reject) => {
  let seen = ''
  server.stdout.on('data', (d) => {
    seen += d
    const m = / at (http:\/\/\S+)\/v1 /.exec(seen)
    if (m) resolve(m[1] as string)
  })
  server.once('exit', (code) => reject(new Error(`seedflow serve exited ${code} before listening`)))
})
const stopServer = () =>
  new Promise<number | null>((resolve) => {
    server.once('exit', (code) => resolve(code))
    server.kill('SIGTERM')
  })

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text()
  const line = text.split('\n').find((l) => l.startsWith(`${name} `))
  return line ? Number(line.split(' ').pop()) : 0
}

try {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 600_000 })
  const model = (await client.models.list()).data[0]?.id as string

  /** One client: a streamed chat completion of exactly maxTokens tokens; its time to first token. */
  const one = async (i: number, repeat: number) => {
    const started = performance.now()
    let first = 0
    let tokens = 0
    const stream = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: PROMPTS[i % PROMPTS.length] as string }],
      max_tokens: maxTokens,
      temperature: 0.7,
      seed: 1000 * repeat + i,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true },
    } as OpenAI.ChatCompletionCreateParamsStreaming)
    for await (const chunk of stream) {
      if (!first && chunk.choices[0]?.delta.content) first = performance.now()
      if (chunk.usage) tokens = chunk.usage.completion_tokens
    }
    return { tokens, ttft: ((first || performance.now()) - started) / 1000 }
  }

  const level = async (clients: number, repeat: number) => {
    const steps0 = await metric('seedflow_serve_decode_steps_total')
    const rows0 = await metric('seedflow_serve_step_rows_total')
    const started = performance.now()
    const runs = await Promise.all(Array.from({ length: clients }, (_, i) => one(i, repeat)))
    const seconds = (performance.now() - started) / 1000
    const steps = (await metric('seedflow_serve_decode_steps_total')) - steps0
    const rows = (await metric('seedflow_serve_step_rows_total')) - rows0
    const tokens = runs.reduce((n, r) => n + r.tokens, 0)
    return {
      seconds,
      tokens,
      tokensPerSecond: tokens / seconds,
      ttft: median(runs.map((r) => r.ttft)),
      steps,
      occupancy: rows / steps,
    }
  }

  say(
    `seedflow serve ${basename(folder)} at ${url}: ${threads} threads, context ${values.context}, max_tokens ${maxTokens}`,
  )
  await level(1, -1) // warm-up: graph sessions and arenas
  await level(4, -1)
  const samples: Record<number, Awaited<ReturnType<typeof level>>[]> = { 1: [], 4: [], 16: [] }
  for (let r = 0; r < repeats; r++)
    for (const clients of LEVELS) {
      const s = await level(clients, r)
      samples[clients]?.push(s)
      say(
        `repeat ${r + 1}/${repeats}, ${String(clients).padStart(2)} clients: ${s.tokensPerSecond.toFixed(1)} tokens/s ` +
          `(${s.tokens} tokens in ${s.seconds.toFixed(2)} s), ttft ${s.ttft.toFixed(2)} s, ${s.steps} steps, ` +
          `${s.occupancy.toFixed(1)} rows per step`,
      )
    }
  const loadAfter = loadavg()
  const summary = LEVELS.map((clients) => {
    const xs = samples[clients] as Awaited<ReturnType<typeof level>>[]
    const tps = xs.map((s) => s.tokensPerSecond)
    // the load of a shared machine drifts: compare each level with the one client of the same repeat
    const ratios = xs.map((s, r) => s.tokensPerSecond / (samples[1]?.[r]?.tokensPerSecond as number))
    return {
      clients,
      speedupOverOne: { median: median(ratios), perRepeat: ratios },
      tokensPerSecond: { min: Math.min(...tps), median: median(tps), samples: tps },
      timeToFirstTokenSeconds: { min: Math.min(...xs.map((s) => s.ttft)), median: median(xs.map((s) => s.ttft)) },
      meanOccupancy: median(xs.map((s) => s.occupancy)),
      stepsPerRepeat: median(xs.map((s) => s.steps)),
    }
  })
  const result = {
    date: new Date().toISOString(),
    checkpoint: basename(folder),
    command: `npm run bench:serve -- ${folder} --threads ${threads} --context ${values.context} --max-tokens ${maxTokens} --repeats ${repeats}`,
    machine: { cpus: cpus().length, cpu: cpus()[0]?.model, node: process.version },
    server: { threads, context: Number(values.context), rows: 16 },
    request: {
      endpoint: '/v1/chat/completions',
      stream: true,
      maxTokens,
      temperature: 0.7,
      ignoreEos: true,
      prompts: PROMPTS.length,
    },
    repeats,
    loadAverage: { before: loadBefore, after: loadAfter },
    levels: summary,
  }
  await writeFile(new URL('./results/serve.json', import.meta.url), `${JSON.stringify(result, null, 2)}\n`)
  const rows = summary.map(
    (s) =>
      `| ${s.clients} | ${s.tokensPerSecond.median.toFixed(1)} | ${s.tokensPerSecond.min.toFixed(1)} | ` +
      `${s.speedupOverOne.median.toFixed(1)}× (${s.speedupOverOne.perRepeat.map((x) => x.toFixed(1)).join(', ')}) | ` +
      `${s.timeToFirstTokenSeconds.median.toFixed(2)} | ${s.meanOccupancy.toFixed(1)} |`,
  )
  const md = [
    `# seedflow serve on ${basename(folder)} (${result.date.slice(0, 10)})`,
    '',
    `\`${result.command}\``,
    '',
    `${result.machine.cpus} CPUs (${result.machine.cpu}), Node ${result.machine.node}; ORT ${threads} threads; ` +
      `decode batch of 16 rows × ${values.context} cache slots. Each client streams one chat completion of exactly ` +
      `${maxTokens} tokens (ignore_eos, temperature 0.7); the levels are interleaved within each of ${repeats} repeats.`,
    `Load average (1, 5, 15 min) before ${loadBefore.map((x) => x.toFixed(2)).join(', ')}, after ` +
      `${loadAfter.map((x) => x.toFixed(2)).join(', ')}: the machine is shared, so absolute figures move with its load.`,
    '',
    '| clients | tokens/s (median) | tokens/s (min) | vs 1 client in the same repeat (median; each repeat) | time to first token, s (median) | rows per step |',
    '|---:|---:|---:|---:|---:|---:|',
    ...rows,
    '',
  ].join('\n')
  await writeFile(new URL('./results/serve.md', import.meta.url), md)
  say('wrote bench/results/serve.json and bench/results/serve.md')
} finally {
  const code = await stopServer()
  if (code !== 0) process.exitCode = 1
}
