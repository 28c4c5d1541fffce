// The update and rescore phases of the main job's iteration (the cpu-sokoban preset's Stage 2), BEFORE issue 42's
// trainer (commit f9489c5, checked out as a git worktree: weights fed to every run, gradients fetched, the JS AdamW)
// and AFTER it (this tree), through the worker engine the product runs (createWorkerEngine, 2 ORT threads). The core
// functions `rescore()` and `update()` of compute/ (activities/core/ before the split), not Temporal. Child processes alternate between the two
// trees (before, after, then after, before, …), each timing one rescore and one update on a fresh engine (cold:
// graphs built and sessions made inside the phase, as a phase on a fresh worker) and then a second rescore and
// update on the same engine (warm: the sessions exist, as on a worker that ran the previous iteration).
// The inputs are made once, here, in this tree, and read by every child: a checkpoint of the main job's model
// (random weights, a BPE of the inputs' texts, as compute/warmstart.ts `startingPolicy` makes it) and one
// iteration's rollout: 16 tasks × 8 samples of sokoban played by the expert with a quarter of random actions
// (~the 900 step samples of one main-job iteration), every other trajectory with an episode-skill teacher block,
// the reference a second policy of the same checkpoint (an iteration after the first).
// Writes bench/results/phases-ab.json and .md.
//   git worktree add /tmp/seedflow-before f9489c5 && ln -s "$PWD/node_modules" /tmp/seedflow-before/node_modules
//   node --import tsx bench/phases-ab.ts               # BENCH_REPEATS=3 children per tree
//   SEEDFLOW_BEFORE_TREE=/elsewhere BENCH_REPEATS=5 node --import tsx bench/phases-ab.ts
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { readFile, writeFile } from 'node:fs/promises'
import { loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { checkpointCodec } from '../compute/policy.ts'
import { stepPrompt } from '../compute/prompts.ts'
import type { RolloutTrajectory } from '../compute/rollout.ts'
import { sampleTasks } from '../compute/rollout.ts'
import { getEnv } from '../envs/index.ts'
import { mulberry32 } from '../envs/rng.ts'
import { trainByteLevelBpe } from '../policy/bpe-trainer.ts'
import type { Checkpoint } from '../policy/checkpoint.ts'
import { initWeights } from '../policy/init.ts'
import { TextTokenizer, TINY_SPECIAL_TOKENS } from '../policy/tokenizer.ts'
import { runConfig } from '../seed/config.ts'
import { episodeSkillBlock } from '../seed/index.ts'
import { CPU_SOKOBAN } from '../seed/presets/cpu.ts'
import { BEFORE_TREE, childOrReport, say } from './before-after.ts'
import { TRAFFIC_MODELS } from './engine-traffic-measure.ts'
import { minMedian } from './min-median.ts'

const THREADS = Number(process.env.SEEDFLOW_THREADS ?? 2)
const REPEATS = Number(process.env.BENCH_REPEATS ?? 3)
const AFTER_TREE = fileURLToPath(new URL('..', import.meta.url))
const INPUTS = join(tmpdir(), 'seedflow-phases-ab-inputs.json')
const OUT = fileURLToPath(new URL('results/phases-ab', import.meta.url))
const SKILL = 'Push the box X toward the target O; never push it into a corner.'
/** The rescore phase's batch (activities/phases/rescore.ts). */
const RESCORE_BATCH = 64

interface Inputs {
  checkpoint: Omit<Checkpoint, 'weights'> & { weights: Record<string, string> }
  trajectories: RolloutTrajectory[]
  teacherBlocks: (string | null)[]
}

/** One iteration's worth of step samples and the checkpoint that scores them, made in this tree. */
function prepare(): Inputs {
  const env = getEnv('sokoban')
  const run = runConfig({ ...CPU_SOKOBAN, algorithm: 'seed' })
  const prompt = run.prompt
  const { tasksPerStep, groupSize, maxEnvSteps } = run.stage2
  const rng = mulberry32(7)
  const tasks = sampleTasks('sokoban', 'train', tasksPerStep, 11)
  const episodes = tasks.flatMap((task, group) =>
    Array.from({ length: groupSize }, (_, sample) => {
      const episode = env.reset(task)
      const steps: Array<{ text: string; response: string; action: string; expert: string }> = []
      while (!episode.done && steps.length < maxEnvSteps) {
        const text = stepPrompt(episode, prompt)
        const expert = episode.expertAction()
        const action = rng.next() < 0.25 ? episode.randomAction(rng) : expert
        const response = env.formatResponse(action)
        steps.push({ text, response, action, expert })
        episode.step(response)
      }
      return { task, group, sample, steps, totalReward: episode.trajectory().totalReward }
    }),
  )
  const block = episodeSkillBlock(SKILL)
  const corpus = [block, ...episodes.flatMap((e) => e.steps.flatMap((s) => [s.text, s.response]))]
  const m = TRAFFIC_MODELS.main?.config
  if (!m) throw new Error('no main model in bench/engine-traffic-measure.ts')
  const tokenizerJson = trainByteLevelBpe(corpus, { vocabSize: m.vocabSize, specialTokens: [...TINY_SPECIAL_TOKENS] })
  const tokenizer = new TextTokenizer(tokenizerJson)
  const config = { ...m, vocabSize: tokenizer.vocabSize }
  const weights = initWeights(config, mulberry32(2))
  const checkpoint: Checkpoint = { config, weights, tokenizerJson, eosIds: [...tokenizer.eosIds] }
  const codec = checkpointCodec(checkpoint)
  const trajectories = episodes.map((e, id) => {
    const responses = e.steps.map((s) => codec.responseIds(s.response))
    return {
      id,
      group: e.group,
      sample: e.sample,
      task: e.task,
      won: e.totalReward > 0,
      score: e.totalReward,
      totalReward: e.totalReward,
      steps: e.steps.map((s, i) => ({
        promptText: s.text,
        actingPrompt: s.text,
        promptIds: codec.promptIds(s.text),
        responseIds: responses[i] as number[],
        samplerLogprobs: (responses[i] as number[]).map(() => 0),
        responseText: s.response,
        action: s.action,
        valid: true,
        reward: 0,
        skill: null,
        historyDropped: 0,
        expertAction: s.expert,
      })),
    } as unknown as RolloutTrajectory
  })
  const encoded: Record<string, string> = {}
  for (const [name, w] of weights) encoded[name] = Buffer.from(w.buffer, w.byteOffset, w.byteLength).toString('base64')
  return {
    checkpoint: { ...checkpoint, weights: encoded },
    trajectories,
    teacherBlocks: trajectories.map((t) => (t.id % 2 === 1 ? block : null)),
  }
}

interface ChildResult {
  tree: string
  samples: number
  teacherSamples: number
  seconds: { rescoreCold: number; updateCold: number; rescoreWarm: number; updateWarm: number }
  /** Process CPU seconds (all threads) of the same four. */
  cpu: { rescoreCold: number; updateCold: number; rescoreWarm: number; updateWarm: number }
  /** The first update's metrics: the two trees should agree (same inputs, same step). */
  firstUpdate: Record<string, unknown>
  peakRssMiB: number
}

/** Where `root`'s tree keeps the phases' compute: compute/, or activities/core/ before the folder split. */
function computeDir(root: string): string {
  return existsSync(resolve(root, 'compute/index.ts')) ? 'compute' : 'activities/core'
}

/** One child: the phases on `root`'s code (its own compute and engine), timed. */
async function child(root: string): Promise<ChildResult> {
  const core = (await import(resolve(root, computeDir(root), 'index.ts'))) as typeof import('../compute/index.ts')
  const engines = (await import(resolve(root, 'engine/index.ts'))) as typeof import('../engine/index.ts')
  const { lossTerms } = (await import(
    resolve(root, computeDir(root), 'plan.ts')
  )) as typeof import('../compute/plan.ts')
  const inputs = JSON.parse(await readFile(INPUTS, 'utf8')) as Inputs
  const weights = new Map<string, Float32Array>()
  for (const [name, b64] of Object.entries(inputs.checkpoint.weights)) {
    const bytes = Buffer.from(b64, 'base64')
    weights.set(name, new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)))
  }
  const checkpoint: Checkpoint = { ...inputs.checkpoint, weights }
  const run = runConfig({ ...CPU_SOKOBAN, algorithm: 'seed' })
  const engine = engines.createWorkerEngine({ threads: THREADS })
  const policy = core.loadPolicy(engine, checkpoint)
  const reference = core.loadPolicy(engine, checkpoint)
  const rescoreInput = {
    trajectories: inputs.trajectories,
    teacherBlocks: inputs.teacherBlocks,
    budget: {
      maxPromptTokens: run.prompt.maxPromptTokens,
      responseTokens: run.prompt.maxResponseTokens,
      contextLength: run.model.kind === 'builtin' ? run.model.maxPositions : 640,
    },
    temperature: run.stage2.temperature,
    batchSize: RESCORE_BATCH,
  }
  const timed = async <T>(f: () => Promise<T>) => {
    const cpu = process.cpuUsage()
    const started = performance.now()
    const value = await f()
    const used = process.cpuUsage(cpu)
    return { value, seconds: (performance.now() - started) / 1000, cpu: (used.user + used.system) / 1e6 }
  }
  const phase = async (optimizerState?: Awaited<ReturnType<typeof core.update>>['optimizerState']) => {
    const r = await timed(() => core.rescore(policy, reference, rescoreInput))
    const u = await timed(async () => {
      const result = await core.update(policy, {
        samples: r.value.samples,
        terms: lossTerms('seed'),
        settings: run.stage2,
        seed: 5,
        ...(optimizerState ? { optimizerState } : {}),
      })
      await core.toCheckpoint(policy) // the phase writes the updated checkpoint
      return result
    })
    return { r, u }
  }
  const cold = await phase()
  const warm = await phase(cold.u.value.optimizerState)
  await engine.close()
  return {
    tree: root,
    samples: cold.r.value.stats.samples,
    teacherSamples: cold.r.value.stats.teacherSamples,
    seconds: {
      rescoreCold: cold.r.seconds,
      updateCold: cold.u.seconds,
      rescoreWarm: warm.r.seconds,
      updateWarm: warm.u.seconds,
    },
    cpu: { rescoreCold: cold.r.cpu, updateCold: cold.u.cpu, rescoreWarm: warm.r.cpu, updateWarm: warm.u.cpu },
    firstUpdate: cold.u.value.metrics as unknown as Record<string, unknown>,
    peakRssMiB: process.resourceUsage().maxRSS / 1024,
  }
}

type Report = {
  date: string
  threads: number
  repeats: number
  inputs: {
    trajectories: number
    stepSamples: number
    teacherTrajectories: number
    rescoreBatch: number
    miniBatchSize: number
  }
  loadAverage: { before: number[]; after: number[] }
  summary: Record<string, Record<'before' | 'after' | 'cpuBefore' | 'cpuAfter', { min: number; median: number }>>
  runs: Record<'before' | 'after', Array<{ loadAverage: number[] }>>
}

/** The markdown of a report (bench/results/phases-ab.md). */
function render(report: Report): string {
  const f = (x: { min: number; median: number }) => `${x.min.toFixed(2)} / ${x.median.toFixed(2)}`
  const r = (a: number, b: number) => `${(a / b).toFixed(2)}×`
  const row = (label: string, k: string) => {
    const s = report.summary[k]
    if (!s) throw new Error(`no ${k} in the report`)
    return (
      `| ${label} | ${f(s.before)} | ${f(s.after)} | ${r(s.before.min, s.after.min)} / ${r(s.before.median, s.after.median)} | ` +
      `${f(s.cpuBefore)} | ${f(s.cpuAfter)} |`
    )
  }
  const loads = (tree: 'before' | 'after') => report.runs[tree].map((x) => x.loadAverage[0]).join(', ')
  const { inputs } = report
  return `${[
    '# Rescore and update of the main job, before and after the resident trainer (issue 42)',
    '',
    `Written by \`node --import tsx bench/phases-ab.ts\` on ${report.date.slice(0, 10)}: the core functions of one ` +
      `main-job iteration (${inputs.stepSamples} step samples from ${inputs.trajectories} sokoban trajectories, ` +
      `${inputs.teacherTrajectories} of them with a teacher block; rescore batch ${inputs.rescoreBatch}, the cpu ` +
      `preset's Stage 2 update settings, mini-batch ${inputs.miniBatchSize}; the main job's model with random ` +
      `weights) over the worker engine at ${report.threads} ORT threads; BEFORE f9489c5, AFTER this tree; ` +
      `${report.repeats} child processes per tree, alternating. Cold: a fresh engine (graphs built, sessions made ` +
      'inside the phase); warm: the same phases again on that engine. Update includes writing the checkpoint ' +
      '(`toCheckpoint`). CPU: the process CPU seconds (every thread) of the same phase.',
    '',
    '| phase | before wall s (min / median) | after wall s (min / median) | before ÷ after (min / median) | before CPU s | after CPU s |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    row('rescore, cold', 'rescoreCold'),
    row('update, cold', 'updateCold'),
    row('rescore, warm', 'rescoreWarm'),
    row('update, warm', 'updateWarm'),
    '',
    `Load average (1, 5, 15 min) before ${report.loadAverage.before.join(', ')}, after ` +
      `${report.loadAverage.after.join(', ')}; the 1-minute one after each child: before ${loads('before')}, after ` +
      `${loads('after')}. The machine has 2 cores shared with other work, so medians move with its load; the ` +
      'minima are the figures to compare.',
    '',
  ].join('\n')}\n`
}

async function main(): Promise<void> {
  if (await childOrReport(OUT, child, render)) return
  const inputs = prepare()
  await writeFile(INPUTS, JSON.stringify(inputs))
  const samples = inputs.trajectories.reduce((n, t) => n + t.steps.length, 0)
  say(`inputs: ${inputs.trajectories.length} trajectories, ${samples} step samples, ${INPUTS}`)
  const trees = { before: BEFORE_TREE, after: AFTER_TREE }
  const runs: Record<'before' | 'after', Array<ChildResult & { loadAverage: number[] }>> = { before: [], after: [] }
  const loadBefore = loadavg()
  for (let i = 0; i < REPEATS; i++) {
    const order: Array<'before' | 'after'> = i % 2 === 0 ? ['before', 'after'] : ['after', 'before']
    for (const tree of order) {
      const out = execFileSync(
        process.execPath,
        ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', trees[tree]],
        {
          encoding: 'utf8',
          maxBuffer: 1 << 24,
          env: { ...process.env, SEEDFLOW_ORT_THREADS: String(THREADS) },
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      )
      const r = JSON.parse(out.trim().split('\n').at(-1) as string) as ChildResult
      const load = loadavg().map((x) => Number(x.toFixed(2)))
      runs[tree].push({ ...r, loadAverage: load })
      say(
        `${i + 1} ${tree}: rescore ${r.seconds.rescoreCold.toFixed(2)} / ${r.seconds.rescoreWarm.toFixed(2)} s, ` +
          `update ${r.seconds.updateCold.toFixed(2)} / ${r.seconds.updateWarm.toFixed(2)} s (cold / warm), load ${load[0]}`,
      )
    }
  }
  const keys = ['rescoreCold', 'updateCold', 'rescoreWarm', 'updateWarm'] as const
  const summary = Object.fromEntries(
    keys.map((k) => {
      const b = minMedian(runs.before.map((r) => r.seconds[k]))
      const a = minMedian(runs.after.map((r) => r.seconds[k]))
      const bc = minMedian(runs.before.map((r) => r.cpu[k]))
      const ac = minMedian(runs.after.map((r) => r.cpu[k]))
      return [
        k,
        {
          before: b,
          after: a,
          ratioMin: b.min / a.min,
          ratioMedian: b.median / a.median,
          cpuBefore: bc,
          cpuAfter: ac,
        },
      ]
    }),
  )
  const report = {
    date: new Date().toISOString(),
    what: 'rescore() and update() (+ toCheckpoint) of compute/ over createWorkerEngine, before (f9489c5) and after (this tree), child processes alternating',
    threads: THREADS,
    repeats: REPEATS,
    inputs: {
      trajectories: inputs.trajectories.length,
      stepSamples: samples,
      teacherTrajectories: inputs.teacherBlocks.filter(Boolean).length,
      rescoreBatch: RESCORE_BATCH,
      miniBatchSize: CPU_SOKOBAN.stage2.miniBatchSize,
      model: inputs.checkpoint.config,
    },
    loadAverage: {
      before: loadBefore.map((x) => Number(x.toFixed(2))),
      after: loadavg().map((x) => Number(x.toFixed(2))),
    },
    summary,
    runs,
  }
  await writeFile(`${OUT}.json`, `${JSON.stringify(report, null, 2)}\n`)
  await writeFile(`${OUT}.md`, render(report))
  say(`wrote ${OUT}.json and ${OUT}.md`)
}

await main()
