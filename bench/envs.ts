// Environment benchmark: env steps per second (excluding any policy) and expert solve rates over 500 tasks per
// split, for every environment in ENVS. Writes bench/results/envs.json.
//   npm run bench:envs [-- --tasks 500 --seconds 2]
import { mkdir, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ENVS } from '../envs/index.ts'
import { mixSeed, mulberry32 } from '../envs/rng.ts'
import { SPLITS, type Split } from '../envs/types.ts'

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? Number(process.argv[i + 1]) : fallback
}
const TASKS = arg('tasks', 500)
const SECONDS = arg('seconds', 2)

interface EnvResult {
  stepsPerSecond: number
  stepsTimed: number
  expertSolveRate: Record<Split, number>
  expertMeanSteps: Record<Split, number>
  randomSuccessRate: number
}

/**
 * Steps/s: random valid actions, responses formatted beforehand, so the figure is parse + transition + episode
 * bookkeeping (and resets when episodes end), not prompt rendering or the random policy.
 */
function stepsPerSecond(env: (typeof ENVS)[keyof typeof ENVS]): { rate: number; steps: number } {
  const rng = mulberry32(1)
  const scripts: { seed: number; responses: string[] }[] = []
  for (let seed = 0; seed < 200; seed++) {
    const ep = env.reset(env.task('train', seed))
    const responses: string[] = []
    while (!ep.done) {
      const r = env.formatResponse(ep.randomAction(rng), '')
      responses.push(r)
      ep.step(r)
    }
    scripts.push({ seed, responses })
  }
  let steps = 0
  const start = performance.now()
  let elapsed = 0
  for (let k = 0; elapsed < SECONDS * 1000; k++) {
    const { seed, responses } = scripts[k % scripts.length] as (typeof scripts)[number]
    const ep = env.reset(env.task('train', seed))
    for (const r of responses) ep.step(r)
    steps += responses.length
    elapsed = performance.now() - start
  }
  return { rate: steps / (elapsed / 1000), steps }
}

const results: Record<string, EnvResult> = {}
for (const [name, env] of Object.entries(ENVS)) {
  const expertSolveRate = {} as Record<Split, number>
  const expertMeanSteps = {} as Record<Split, number>
  for (const split of SPLITS) {
    let won = 0
    let steps = 0
    for (let i = 0; i < TASKS; i++) {
      const ep = env.reset(env.task(split, mixSeed(777, i) % 1_000_000_000))
      while (!ep.done) ep.step(env.formatResponse(ep.expertAction(), ''))
      steps += ep.stepCount
      if (ep.info.won) won++
    }
    expertSolveRate[split] = won / TASKS
    expertMeanSteps[split] = steps / TASKS
  }
  const rng = mulberry32(2026)
  let randomWins = 0
  for (let i = 0; i < TASKS; i++) {
    const ep = env.reset(env.task('test-seen', i))
    while (!ep.done) ep.step(env.formatResponse(ep.randomAction(rng), ''))
    if (ep.info.won) randomWins++
  }
  const speed = stepsPerSecond(env)
  results[name] = {
    stepsPerSecond: Math.round(speed.rate),
    stepsTimed: speed.steps,
    expertSolveRate,
    expertMeanSteps,
    randomSuccessRate: randomWins / TASKS,
  }
  const rates = SPLITS.map((s) => `${s} ${(expertSolveRate[s] * 100).toFixed(1)}%`).join(', ')
  console.log(
    `${name.padEnd(9)} ${String(Math.round(speed.rate)).padStart(8)} steps/s | expert (${TASKS}/split): ${rates} | random: ${(
      (randomWins / TASKS) * 100
    ).toFixed(1)}%`,
  )
}

const out = join(dirname(fileURLToPath(import.meta.url)), 'results', 'envs.json')
await mkdir(dirname(out), { recursive: true })
await writeFile(
  out,
  `${JSON.stringify({ node: process.version, tasksPerSplit: TASKS, seconds: SECONDS, results }, null, 2)}\n`,
)
console.log(`wrote ${out}`)
