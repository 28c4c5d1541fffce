// The pieces of a SmolLM2-135M-Instruct run on household (preset cpu-household-smollm2, seed/presets/smollm2.ts),
// timed one at a time so that a whole run's time can be estimated without running it (docs/benchmarks.md §6.7).
// In process, no Temporal; the core functions the pipeline's activities call, with the preset's settings.
//   node --import tsx bench/smollm2-household.ts eval <folder> [--prompt compact|full] [--tasks 24]
//        [--max-steps N] [--max-response N] [--temperature 0.4]
//     the base model on household validation: the same rollout `evaluate` (and `seedflow eval`) runs, one episode
//     per task; compact = the preset's prompt, full = paper-household's (history 5, instructions in full)
//   node --import tsx bench/smollm2-household.ts warmstart <folder> [--steps 6] [--check-tasks 0]
//     behaviour-cloning steps of the preset's warm-start (its demonstrations, pools, batch and LoRA); with
//     --check-tasks N, then `evaluate` of the result on N validation tasks (the preset's evaluation T and step cap)
//   node --import tsx bench/smollm2-household.ts rollout <folder> [--tasks B] [--group N]
//     one Stage 2 rollout of the preset's batch (B tasks × N samples, its step cap and temperature), base weights
//   node --import tsx bench/smollm2-household.ts analyze <folder> [--trajectories 1]
//     the policy writing its own skill for rolled-out trajectories (greedy, the preset's analyzer budget)
//   node --import tsx bench/smollm2-household.ts stage1 <folder> [--steps 6] [--tasks 1]
//     Stage 1 with the preset's settings on fewer tasks: rollouts annotated by the oracle, then `steps` SFT steps
//     (skill JSON mixed with the replayed warm-start demonstrations) on fresh LoRA adapters
//   node --import tsx bench/smollm2-household.ts update <folder> [--tasks 1] [--group N]
//     one group's rollout, its rescore (old, reference and teacher log-probs, each trajectory taught by the oracle's
//     skill for it) and the `seed` row's update over its step samples, with fresh LoRA adapters
//   node --import tsx bench/smollm2-household.ts expert
//     the environment's expert on 500 train and 500 validation tasks: how many steps it needs (no model)
// Threads: SEEDFLOW_ORT_THREADS (default 1). Prints one JSON line of figures at the end.
import { loadavg } from 'node:os'
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import {
  aggregateEvaluation,
  analyze,
  annotateStage1,
  type EvaluationTaskRecord,
  evaluate,
  LORA_SEED,
  loadPolicy,
  lossTerms,
  type RolloutTrajectory,
  rescore,
  rollout,
  sampleTasks,
  trainStage1,
  update,
  warmstart,
  withLora,
} from '../compute/index.ts'
import { createLocalEngine } from '../engine/index.ts'
import { getEnv } from '../envs/index.ts'
import { mixSeed } from '../envs/rng.ts'
import { importHuggingFaceFolder } from '../policy/hf-import.ts'
import { envLabel } from '../seed/config.ts'
import { episodeSkillBlock } from '../seed/index.ts'
import { paperPreset } from '../seed/presets/paper.ts'
import { cpuHouseholdSmollm2Preset } from '../seed/presets/smollm2.ts'

const args = parseArgs({
  allowPositionals: true,
  options: {
    prompt: { type: 'string', default: 'compact' },
    tasks: { type: 'string' },
    group: { type: 'string' },
    'max-steps': { type: 'string' },
    'max-response': { type: 'string' },
    temperature: { type: 'string', default: '0.4' },
    steps: { type: 'string', default: '6' },
    trajectories: { type: 'string', default: '1' },
    'seed-start': { type: 'string', default: '0' },
    'check-tasks': { type: 'string', default: '0' },
  },
})
const [command, folderArg] = args.positionals
if (command === 'expert') {
  const env = getEnv('household')
  const figures: Record<string, unknown> = { command }
  for (const split of ['train', 'validation'] as const) {
    const lengths: number[] = []
    for (let seed = 0; seed < 500; seed++) {
      const episode = env.reset(env.task(split, seed))
      while (!episode.done) episode.step(env.formatResponse(episode.expertAction()))
      if (episode.trajectory().info.won) lengths.push(episode.stepCount)
    }
    const within = (k: number) => lengths.filter((n) => n <= k).length / 500
    figures[split] = {
      solved: lengths.length / 500,
      meanSteps: lengths.reduce((a, b) => a + b, 0) / lengths.length,
      within15: within(15),
      within20: within(20),
    }
  }
  process.stdout.write(`${JSON.stringify(figures)}\n`)
  process.exit(0)
}
if (!command || !folderArg) {
  console.error(
    'usage: bench/smollm2-household.ts eval|warmstart|stage1|rollout|analyze|update <folder> [options] | expert',
  )
  process.exit(2)
}
const folder = resolve(folderArg)
const threads = Number(process.env.SEEDFLOW_ORT_THREADS ?? 1)
const config = cpuHouseholdSmollm2Preset(folder)
const num = (name: keyof typeof args.values, fallback: number) =>
  args.values[name] === undefined ? fallback : Number(args.values[name])
const log = (text: string) => process.stderr.write(`${text}\n`)

const engine = createLocalEngine({ threads })
const { checkpoint } = await importHuggingFaceFolder(folder)
const figures: Record<string, unknown> = { command, threads, loadBefore: loadavg()[0] }

/** Share of well-formed steps whose action did nothing (`Nothing happens.`: not admissible there). */
function noEffectRate(trajectories: readonly RolloutTrajectory[]): number {
  let valid = 0
  let nothing = 0
  for (const t of trajectories) {
    const steps = t.trajectory.steps
    steps.forEach((s, i) => {
      if (!s.valid) return
      valid++
      const next = steps[i + 1]?.observation ?? t.trajectory.finalObservation
      if (next.startsWith('Nothing happens')) nothing++
    })
  }
  return valid === 0 ? Number.NaN : nothing / valid
}

function reasons(trajectories: readonly RolloutTrajectory[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const t of trajectories)
    for (const s of t.trajectory.steps) if (!s.valid) counts[s.reason ?? '?'] = (counts[s.reason ?? '?'] ?? 0) + 1
  return counts
}

try {
  if (command === 'eval') {
    const full = args.values.prompt === 'full'
    const paper = paperPreset('household', folder, 'seed', checkpoint.config.maxPositions)
    const prompt = {
      ...(full ? paper.prompt : config.prompt),
      ...(args.values['max-response'] ? { maxResponseTokens: num('max-response', 0) } : {}),
    }
    const maxEnvSteps = num('max-steps', full ? paper.evaluation.maxEnvSteps : config.evaluation.maxEnvSteps)
    const tasks = num('tasks', 24)
    const seedStart = num('seed-start', 0)
    const temperature = num('temperature', 0.4)
    const policy = loadPolicy(engine, checkpoint)
    log(
      `eval: ${tasks} validation tasks from seed ${seedStart}, ${full ? 'full' : 'compact'} prompt, ` +
        `${maxEnvSteps} steps, ${prompt.maxResponseTokens} response tokens, T = ${temperature}, ${threads} thread(s)`,
    )
    // the rollout `evaluate` runs (compute/evaluate.ts), kept here for the responses themselves
    const r = await rollout(policy, {
      env: 'household',
      tasks: Array.from({ length: tasks }, (_, i) => ({ split: 'validation' as const, seed: seedStart + i })),
      groupSize: 1,
      maxEnvSteps,
      temperature,
      prompt,
      seed: config.seed,
      onProgress: (done, all) => log(`  ${done}/${all} episodes done, ${(performance.now() / 1000).toFixed(0)} s`),
    })
    const records: EvaluationTaskRecord[] = r.trajectories.map((t) => ({
      seed: t.task.seed,
      family: t.trajectory.info.family as string,
      success: t.won,
      score: t.score,
      steps: t.steps.length,
      invalidSteps: t.steps.filter((s) => !s.valid).length,
    }))
    const a = aggregateEvaluation(records)
    Object.assign(figures, {
      prompt: full ? 'full' : 'compact',
      tasks,
      maxEnvSteps,
      maxResponseTokens: prompt.maxResponseTokens,
      temperature,
      success: a.success,
      invalidRate: a.invalidRate,
      noEffectRate: noEffectRate(r.trajectories),
      invalidReasons: reasons(r.trajectories),
      meanLength: a.length.value,
      newTokensPerStep: r.stats.newTokens / r.stats.stepSamples,
      stepSamples: r.stats.stepSamples,
      seconds: r.stats.seconds,
      secondsPerEpisode: r.stats.seconds / tasks,
      secondsPerStep: r.stats.seconds / maxEnvSteps,
    })
    for (const t of r.trajectories.slice(0, 2))
      for (const s of t.steps.slice(0, 3)) log(`  response (task ${t.task.seed}): ${JSON.stringify(s.responseText)}`)
    await policy.trainer.release()
  } else if (command === 'warmstart') {
    const ws = config.warmstart
    if (!ws || config.model.kind !== 'imported') throw new Error('the preset has no warm-start')
    const steps = num('steps', 6)
    const checkTasks = num('check-tasks', 0)
    log(`warmstart: ${steps} steps, batch ${ws.batchSize}, ${ws.demoTasks} demonstration tasks, LoRA`)
    const started = performance.now()
    const r = await warmstart(engine, {
      env: config.env,
      model: { kind: 'imported', base: checkpoint, ...(config.model.lora ? { lora: config.model.lora } : {}) },
      prompt: config.prompt,
      warmstart: { ...ws, steps, evalEvery: 0, framePolishSteps: 0, warmupSteps: 1 },
      analyzer: config.stage2.analyzer,
      evaluation: config.evaluation,
      engineSettings: config.engine,
      seed: config.seed,
    })
    const seconds = (performance.now() - started) / 1000
    Object.assign(figures, {
      steps,
      batchSize: ws.batchSize,
      plainPairs: r.stats.plainPairs,
      skillPairs: r.stats.skillPairs,
      trainedParameters: r.stats.trainedParameters,
      firstLoss: r.stats.firstLoss,
      lastLoss: r.stats.lastLoss,
      seconds,
      // setup included (demonstrations, the import, the train graph): compare two step counts for the rate
      secondsPerStep: seconds / steps,
    })
    if (checkTasks > 0) {
      const policy = loadPolicy(engine, r.checkpoint, { settings: config.engine })
      const e = await evaluate(policy, {
        env: config.env,
        split: 'validation',
        seedStart: 0,
        tasks: checkTasks,
        temperature: config.evaluation.temperature,
        maxEnvSteps: config.evaluation.maxEnvSteps,
        prompt: config.prompt,
        seed: config.seed,
      })
      Object.assign(figures, {
        check: {
          tasks: checkTasks,
          success: e.aggregates.success,
          invalidRate: e.invalidRate,
          meanLength: e.meanLength,
          seconds: e.seconds,
        },
      })
      await policy.trainer.release()
    }
  } else if (command === 'stage1') {
    const steps = num('steps', 6)
    const s1 = { ...config.stage1, tasks: num('tasks', 1), steps, warmupSteps: 1 }
    const c = { ...config, stage1: s1 }
    const policy = loadPolicy(engine, checkpoint, { settings: config.engine })
    log(`stage1: ${s1.tasks} tasks × ${s1.samplesPerTask} samples annotated by the oracle, ${steps} SFT steps`)
    const annotated = await annotateStage1(policy, c)
    if (config.model.lora) await withLora(policy, config.model.lora, mixSeed(config.seed, LORA_SEED))
    const trained = await trainStage1(policy, annotated, c)
    const prompts = annotated.skills.map((k) => policy.codec.countPromptTokens(k.prompt))
    Object.assign(figures, {
      trajectories: annotated.trajectories.length,
      rolloutSeconds: annotated.rollout.seconds,
      annotated: annotated.skills.filter((k) => k.ok).length,
      analyzerPromptTokens: prompts,
      skillPairs: trained.skillPairs,
      actingPairs: trained.actingPairs,
      steps: trained.steps,
      batchSize: s1.batchSize,
      firstLoss: trained.firstLoss,
      lastLoss: trained.lastLoss,
      sftSeconds: trained.seconds,
    })
    await policy.trainer.release()
  } else if (command === 'rollout' || command === 'analyze' || command === 'update') {
    const s2 = config.stage2
    const policy = loadPolicy(engine, checkpoint, { settings: config.engine })
    const tasksPerStep = num(
      'tasks',
      command === 'analyze' ? num('trajectories', 1) : command === 'update' ? 1 : s2.tasksPerStep,
    )
    const groupSize = num('group', command === 'analyze' ? 1 : s2.groupSize)
    log(`rollout: ${tasksPerStep} train tasks × ${groupSize} samples, ${s2.maxEnvSteps} steps, T = ${s2.temperature}`)
    const r = await rollout(policy, {
      env: config.env,
      tasks: sampleTasks(config.env, 'train', tasksPerStep, 7),
      groupSize,
      maxEnvSteps: s2.maxEnvSteps,
      temperature: s2.temperature,
      prompt: config.prompt,
      seed: 7,
    })
    Object.assign(figures, {
      episodes: r.stats.episodes,
      stepSamples: r.stats.stepSamples,
      invalidRate: r.stats.invalidRate,
      newTokens: r.stats.newTokens,
      rolloutSeconds: r.stats.seconds,
    })
    if (command === 'analyze') {
      const n = num('trajectories', 1)
      const a = await analyze(policy, {
        trajectories: r.trajectories.slice(0, n),
        prompt: config.prompt,
        maxPromptTokens: s2.analyzer.maxPromptTokens,
        maxAnswerTokens: s2.analyzer.maxAnswerTokens,
        batchSize: n,
      })
      const prompts = a.skills.map((s) => policy.codec.countPromptTokens(s.prompt))
      Object.assign(figures, {
        trajectories: n,
        analyzerPromptTokens: prompts,
        newTokens: a.stats.newTokens,
        parsed: a.stats.parse,
        analyzeSeconds: a.stats.seconds,
      })
      for (const s of a.skills) log(`  analyzer answer: ${JSON.stringify(s.raw.slice(0, 400))}`)
    }
    if (command === 'update') {
      const env = getEnv(envLabel(config.env))
      // the teacher of SEED: each trajectory's own skill (here the oracle's, as a parsed analysis would give)
      const blocks = r.trajectories.map((t) => episodeSkillBlock(env.oracle(t.trajectory).output.episode_skill))
      const reference = loadPolicy(engine, checkpoint, { settings: config.engine })
      const scored = await rescore(policy, reference, {
        trajectories: r.trajectories,
        teacherBlocks: blocks,
        budget: {
          maxPromptTokens: config.prompt.maxPromptTokens,
          responseTokens: config.prompt.maxResponseTokens,
          contextLength: config.model.maxPositions,
        },
        temperature: s2.temperature,
        batchSize: 64,
      })
      await reference.trainer.release()
      if (config.model.lora) await withLora(policy, config.model.lora, mixSeed(config.seed, LORA_SEED))
      const started = performance.now()
      const u = await update(policy, { samples: scored.samples, terms: lossTerms('seed'), settings: s2 })
      Object.assign(figures, {
        rescoreSeconds: scored.stats.seconds,
        teacherSamples: scored.stats.teacherSamples,
        miniBatches: u.perMiniBatch.length,
        miniBatchSize: s2.miniBatchSize,
        updateSeconds: (performance.now() - started) / 1000,
        loss: u.metrics.loss,
      })
    }
    await policy.trainer.release()
  } else {
    throw new Error(`unknown command ${command}`)
  }
} finally {
  await engine.close()
}
figures.loadAfter = loadavg()[0]
figures.env = getEnv('household').name
process.stdout.write(`${JSON.stringify(figures)}\n`)
