// What the environment protocol costs a run (issue 45): the main job's rollout (the CPU sokoban preset's model and
// prompt, 16 tasks × 8 samples, its step cap and temperature) on the built-in environment in this process and on
// `seedflow env serve sokoban` over loopback HTTP (the server in this process too), interleaved. The two play the
// same episodes (the same seed, the same policy: test/compute/remote-rollout.test.ts shows them equal), so the ratio
// is the protocol's share of a rollout: decoding and the environment's calls together. The policy is the preset's
// shape after a short warm-start (its tokenizer and 20 steps), not a trained one.
//   node --import tsx bench/env-http-rollout-ab.ts [--repeats 3] [--out bench/results/env-http-rollout-ab.json]
import { writeFile } from 'node:fs/promises'
import { parseArgs } from 'node:util'
import { loadPolicy, sampleTasks, warmstart } from '../compute/index.ts'
import { rollout } from '../compute/rollout.ts'
import { createLocalEngine } from '../engine/index.ts'
import { serveEnv } from '../envs/http/index.ts'
import { HttpEnvSchema, type RunEnvSpec } from '../seed/config.ts'
import { cpuSokobanPreset } from '../seed/presets/cpu.ts'
import { minMedian } from './min-median.ts'

const { values } = parseArgs({
  options: {
    repeats: { type: 'string', default: '3' },
    out: { type: 'string', default: 'bench/results/env-http-rollout-ab.json' },
  },
})
const config = cpuSokobanPreset()
if (config.model.kind !== 'builtin' || !config.warmstart) throw new Error('the CPU sokoban preset is built-in')
const engine = createLocalEngine({ threads: 2 })
process.stdout.write('warm-start (tokenizer and 20 steps) …\n')
const { checkpoint } = await warmstart(engine, {
  env: 'sokoban',
  model: config.model,
  prompt: config.prompt,
  warmstart: { ...config.warmstart, demoTasks: 200, steps: 20, evalEvery: 0, framePolishSteps: 0 },
  evaluation: config.evaluation,
  seed: config.seed,
})
const policy = loadPolicy(engine, checkpoint)
const served = await serveEnv('sokoban', { port: 0, host: '127.0.0.1' })
const sides: Record<string, RunEnvSpec> = {
  'in process': 'sokoban',
  'over HTTP': HttpEnvSchema.parse({
    kind: 'http',
    baseUrl: served.url,
    name: 'sokoban',
    maxSteps: 15,
    stop: ['</action>'],
  }),
}
const tasks = sampleTasks('sokoban', 'train', config.stage2.tasksPerStep, 11)
const seconds: Record<string, number[]> = { 'in process': [], 'over HTTP': [] }
let steps = 0
for (let r = 0; r < Number(values.repeats); r++) {
  const order = Object.keys(sides)
  if (r % 2 === 1) order.reverse()
  for (const side of order) {
    const result = await rollout(policy, {
      env: sides[side] as RunEnvSpec,
      tasks,
      groupSize: config.stage2.groupSize,
      maxEnvSteps: config.stage2.maxEnvSteps,
      temperature: config.stage2.temperature,
      prompt: config.prompt,
      seed: 5,
    })
    seconds[side]?.push(result.stats.seconds)
    steps = result.stats.stepSamples
    process.stdout.write(`repeat ${r + 1}: ${side} ${result.stats.seconds.toFixed(2)} s (${steps} steps)\n`)
  }
}
await served.close()
await policy.trainer.release()
await engine.close()
const local = minMedian(seconds['in process'] ?? [])
const remote = minMedian(seconds['over HTTP'] ?? [])
const report = {
  date: new Date().toISOString(),
  rollout: { tasks: tasks.length, groupSize: config.stage2.groupSize, maxEnvSteps: config.stage2.maxEnvSteps },
  stepsPerRollout: steps,
  secondsPerRollout: { inProcess: local, overHttp: remote },
  ratio: { min: remote.min / local.min, median: remote.median / local.median },
  millisecondsMorePerStep: ((remote.median - local.median) / steps) * 1000,
}
await writeFile(values.out, `${JSON.stringify(report, null, 2)}\n`)
process.stdout.write(
  `over HTTP ÷ in process, one rollout: ${report.ratio.min.toFixed(3)}× (min) / ${report.ratio.median.toFixed(3)}× (median); ` +
    `${report.millisecondsMorePerStep.toFixed(2)} ms more per step (median)\n`,
)
