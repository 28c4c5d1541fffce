// The environment protocol's cost per step (issue 45): the same episodes played through the rollout's face
// (envs/played.ts) on the built-in environment in this process and on `seedflow env serve` over loopback HTTP
// (envs/http/remote-env.ts), interleaved in one process. Per step a rollout asks for the prompt and the
// expert's action, then steps; at the end it reads the trajectory and closes the episode: all of that is timed.
// Scripted expert responses, so no policy is involved: the figure is the protocol's overhead, not the model's.
//   node --import tsx bench/env-http-ab.ts [--env sokoban] [--episodes 64] [--repeats 5]
//     [--out bench/results/env-http-ab.json]
import { writeFile } from 'node:fs/promises'
import { parseArgs } from 'node:util'
import { environmentOf } from '../compute/environment.ts'
import { serveEnv } from '../envs/http/index.ts'
import { getEnv } from '../envs/index.ts'
import type { PlayedEnv } from '../envs/played.ts'
import { ENV_STOP_STRINGS, HttpEnvSchema, type RunEnvName } from '../seed/config.ts'
import { minMedian } from './min-median.ts'

const { values } = parseArgs({
  options: {
    env: { type: 'string', default: 'sokoban' },
    episodes: { type: 'string', default: '64' },
    repeats: { type: 'string', default: '5' },
    out: { type: 'string', default: 'bench/results/env-http-ab.json' },
  },
})
const env = getEnv(values.env as RunEnvName)
const episodes = Number(values.episodes)
const tasks = Array.from({ length: episodes }, (_, i) => env.task('train', i))

/** Seconds per step over the episodes, each played to its end by the expert, all episodes' turns together. */
async function play(played: PlayedEnv): Promise<{ secondsPerStep: number; steps: number }> {
  const started = performance.now()
  const live = await Promise.all(tasks.map((task) => played.open(task)))
  let steps = 0
  for (;;) {
    const turn = live.filter((e) => !e.done && e.stepCount < env.maxSteps)
    if (turn.length === 0) break
    await Promise.all(
      turn.map(async (e) => {
        await e.prompt()
        const action = (await e.expert())?.action ?? ''
        await e.step(env.formatResponse(action))
      }),
    )
    steps += turn.length
  }
  await Promise.all(live.map(async (e) => (await e.trajectory(), await e.close())))
  return { secondsPerStep: (performance.now() - started) / 1000 / steps, steps }
}

const served = await serveEnv(env.name as Parameters<typeof serveEnv>[0], { port: 0, host: '127.0.0.1' })
const stop = ENV_STOP_STRINGS[env.name as RunEnvName]
const sides = {
  'in process': environmentOf(env.name as RunEnvName),
  'over HTTP': environmentOf(
    HttpEnvSchema.parse({ kind: 'http', baseUrl: served.url, maxSteps: env.maxSteps, stop, retries: 0 }),
  ),
} as const satisfies Record<string, PlayedEnv>
const times: Record<string, number[]> = { 'in process': [], 'over HTTP': [] }
let steps = 0
for (let r = 0; r < Number(values.repeats); r++) {
  const order = Object.keys(sides) as (keyof typeof sides)[]
  if (r % 2 === 1) order.reverse()
  for (const side of order) {
    const t = await play(sides[side])
    times[side]?.push(t.secondsPerStep)
    steps = t.steps
    process.stdout.write(
      `repeat ${r + 1}: ${side} ${(t.secondsPerStep * 1e6).toFixed(0)} µs per step (${t.steps} steps)\n`,
    )
  }
}
await served.close()
const local = minMedian(times['in process'] ?? [])
const remote = minMedian(times['over HTTP'] ?? [])
const report = {
  date: new Date().toISOString(),
  env: env.name,
  episodes,
  stepsPerRepeat: steps,
  microsecondsPerStep: {
    inProcess: { min: local.min * 1e6, median: local.median * 1e6 },
    overHttp: { min: remote.min * 1e6, median: remote.median * 1e6 },
  },
  ratio: { min: remote.min / local.min, median: remote.median / local.median },
}
await writeFile(values.out, `${JSON.stringify(report, null, 2)}\n`)
process.stdout.write(
  `over HTTP ÷ in process: ${report.ratio.min.toFixed(1)}× (min) / ${report.ratio.median.toFixed(1)}× (median); ` +
    `${(remote.median * 1e6 - local.median * 1e6).toFixed(0)} µs more per step (median)\n`,
)
