// The training core end to end on sokoban, in process (no Temporal, no store): warm-start → Stage 1 → K Stage 2
// iterations of row `seed` (and, with COMPARE_GRPO=1, K iterations of `grpo` from the same warm-start), with
// held-out evaluations of the warm-start, Stage 1 and final checkpoints. Settings: the CPU sokoban preset,
// overridable by environment variables (ITERATIONS, EVAL_TASKS, HISTORY, WS_STEPS, WS_BATCH, WS_LR, S1_STEPS,
// COMPARE_GRPO, THREADS).
// Usage: npm run bench:seed-loop
import { writeFileSync } from 'node:fs'
import {
  annotateWithOracle,
  type EvaluationResult,
  evaluate,
  loadPolicy,
  type Policy,
  rollout,
  runIteration,
  sampleTasks,
  sft,
  toCheckpoint,
  warmstart,
} from '../activities/core/index.ts'
import { createLocalEngine } from '../engine/index.ts'
import { mixSeed } from '../envs/rng.ts'
import type { Checkpoint } from '../policy/checkpoint.ts'
import { cpuSokobanPreset, type RunConfig } from '../seed/config.ts'
import type { AlgorithmName } from '../seed/index.ts'

const envNumber = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
const base = cpuSokobanPreset('seed')
const config: RunConfig = {
  ...base,
  prompt: { ...base.prompt, historyWindow: envNumber('HISTORY', base.prompt.historyWindow) },
  warmstart: {
    ...base.warmstart!,
    steps: envNumber('WS_STEPS', base.warmstart!.steps),
    batchSize: envNumber('WS_BATCH', base.warmstart!.batchSize),
    lr: envNumber('WS_LR', base.warmstart!.lr),
  },
  stage1: { ...base.stage1, steps: envNumber('S1_STEPS', base.stage1.steps) },
  stage2: { ...base.stage2, iterations: envNumber('ITERATIONS', base.stage2.iterations) },
  evaluation: { ...base.evaluation, tasks: envNumber('EVAL_TASKS', base.evaluation.tasks) },
  threads: envNumber('THREADS', base.threads),
}
const engine = createLocalEngine({ threads: config.threads })
const started = performance.now()
const clock = () => `${((performance.now() - started) / 1000).toFixed(0)}s`
const log = (...parts: unknown[]) => console.log(`[${clock()}]`, ...parts)
const f = (x: number | null | undefined, digits = 3) => (x == null ? '-' : x.toFixed(digits))

async function heldOut(policy: Policy, label: string): Promise<EvaluationResult> {
  const r = await evaluate(policy, {
    env: config.env,
    split: config.evaluation.split,
    seedStart: config.evaluation.seedStart,
    tasks: config.evaluation.tasks,
    temperature: config.evaluation.temperature,
    maxEnvSteps: config.evaluation.maxEnvSteps,
    prompt: config.prompt,
    seed: mixSeed(config.seed, 0xe7a1),
    maxBatch: 256,
  })
  log(
    `eval ${label}: success ${(100 * r.successRate).toFixed(1)}% ± ${(100 * r.standardError).toFixed(1)} ` +
      `on ${r.tasks} ${config.evaluation.split} tasks (T=${config.evaluation.temperature}), mean length ${f(r.meanLength, 2)}, ` +
      `invalid ${(100 * r.invalidRate).toFixed(1)}% (${r.seconds.toFixed(0)} s)`,
  )
  return r
}

async function stage2(algorithm: AlgorithmName, start: Checkpoint, label: string) {
  const policy = loadPolicy(engine, start)
  const reference = loadPolicy(engine, start)
  const rowConfig = { ...config, algorithm }
  let optimizerState: Awaited<ReturnType<typeof runIteration>>['optimizerState'] | undefined
  const history = []
  for (let k = 0; k < config.stage2.iterations; k++) {
    const it = await runIteration(
      { policy, reference },
      { config: rowConfig, iteration: k, ...(optimizerState ? { optimizerState } : {}) },
    )
    optimizerState = it.optimizerState
    const u = it.update
    log(
      `${label} it ${k}: train success ${(100 * it.rollout.successRate).toFixed(1)}% len ${f(it.rollout.meanLength, 1)} ` +
        `invalid ${(100 * it.rollout.invalidRate).toFixed(1)}% | parse ${it.analyze ? f(it.analyze.parse.parseRate, 2) : '-'} ` +
        `teacher ${it.rescore.teacherSamples}/${it.rescore.samples} dropped ${it.rescore.teacherTruncation.blockDropped} ` +
        `| loss ${f(u.loss, 4)} pg ${f(u.pgLoss, 4)} clip ${f(u.clipFraction)} (first ${f(u.firstClipFraction)}) ` +
        `kl ${f(u.kl, 4)} H ${f(u.entropy, 2)} opd ${f(u.opdLoss)} gate ${f(u.opdGateMean)} gap+ ${f(u.opdPositiveGapShare)} ` +
        `| ${f(it.rollout.seconds, 0)}+${f(it.analyze?.seconds ?? 0, 0)}+${f(it.rescore.seconds, 0)}+${f(u.seconds, 0)} s`,
    )
    history.push({ iteration: k, rollout: it.rollout, analyze: it.analyze, rescore: it.rescore, update: u })
  }
  return { policy, history }
}

log(`config: ${JSON.stringify({ ...config.stage2, analyzer: undefined })}`)
const ws = await warmstart(engine, {
  env: config.env,
  model: config.model as Extract<RunConfig['model'], { kind: 'builtin' }>,
  prompt: config.prompt,
  warmstart: config.warmstart!,
  evaluation: config.evaluation,
  seed: config.seed,
  onCheck: (c) => log(`warm-start check at step ${c.step}: validation success ${(100 * c.successRate).toFixed(1)}%`),
})
log('warm-start', JSON.stringify(ws.stats))
const warmPolicy = loadPolicy(engine, ws.checkpoint)
const evalWarm = await heldOut(warmPolicy, 'warm-start')

// Stage 1: roll out the base policy, annotate with the oracle, SFT on analyzer pairs mixed with acting data.
const s1 = config.stage1
const s1Rollout = await rollout(warmPolicy, {
  env: config.env,
  tasks: sampleTasks(config.env, 'train', s1.tasks, mixSeed(config.seed, 0x51)),
  groupSize: s1.samplesPerTask,
  maxEnvSteps: s1.maxEnvSteps,
  temperature: s1.temperature,
  prompt: config.prompt,
  seed: mixSeed(config.seed, 0x52),
})
const annotations = annotateWithOracle(config.env, warmPolicy.codec, config.model.maxPositions, {
  trajectories: s1Rollout.trajectories,
  prompt: config.prompt,
  maxPromptTokens: config.stage2.analyzer.maxPromptTokens,
  maxAnswerTokens: config.stage2.analyzer.maxAnswerTokens,
  batchSize: 64,
})
const stage1Policy = loadPolicy(engine, ws.checkpoint)
const sftStats = await sft(stage1Policy, {
  skills: annotations.skills,
  trajectories: s1Rollout.trajectories,
  settings: s1,
  seed: mixSeed(config.seed, 0x53),
})
log(
  `stage 1: ${s1Rollout.stats.episodes} episodes (success ${(100 * s1Rollout.stats.successRate).toFixed(1)}%), ` +
    `annotation parse rate ${annotations.stats.parse.parseRate}, analyzer prompts truncated ${annotations.stats.truncated}; ` +
    `SFT ${JSON.stringify(sftStats)}`,
)
const pi0 = toCheckpoint(stage1Policy)
const evalStage1 = await heldOut(stage1Policy, 'stage-1')

const seedRun = await stage2('seed', pi0, 'seed')
const evalFinal = await heldOut(seedRun.policy, `seed after ${config.stage2.iterations} iterations`)

let grpo: { history: unknown[]; eval: EvaluationResult } | null = null
if (process.env.COMPARE_GRPO === '1') {
  const g = await stage2('grpo', ws.checkpoint, 'grpo')
  grpo = { history: g.history, eval: await heldOut(g.policy, `grpo after ${config.stage2.iterations} iterations`) }
}

const row = (name: string, r: EvaluationResult) =>
  `${name.padEnd(28)} ${(100 * r.successRate).toFixed(1).padStart(6)}% ± ${(100 * r.standardError).toFixed(1)}  length ${r.meanLength.toFixed(2)}`
console.log(
  `\nheld-out success (${config.evaluation.tasks} ${config.evaluation.split} tasks, T=${config.evaluation.temperature}; skills are the oracle analyzer's language):`,
)
console.log(row('warm-start', evalWarm))
console.log(row('stage 1 (π_0)', evalStage1))
console.log(row(`seed, ${config.stage2.iterations} iterations`, evalFinal))
if (grpo) console.log(row(`grpo, ${config.stage2.iterations} iterations`, grpo.eval))
console.log(`total ${clock()}`)
writeFileSync(
  process.env.OUT ?? 'bench/results/seed-loop.json',
  `${JSON.stringify(
    {
      config,
      warmstart: ws.stats,
      stage1: { rollout: s1Rollout.stats, annotation: annotations.stats, sft: sftStats },
      seed: seedRun.history,
      grpo: grpo?.history ?? null,
      evaluation: { warmstart: evalWarm, stage1: evalStage1, seed: evalFinal, grpo: grpo?.eval ?? null },
      seconds: (performance.now() - started) / 1000,
    },
    null,
    1,
  )}\n`,
)
await engine.close()
