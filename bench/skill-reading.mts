// Does a warm-start teach the built-in model to read what its skills say (issue 46, docs/benchmarks.md §3.8)? The
// CPU sokoban preset's warm-start, with warm-start overrides, in process (the warm-start phase's own compute), then
// the premise check of its checkpoint (compute/skill-gap.ts, as `seedflow eval --skill-gap` runs it) on held-out
// validation tasks, and its validation success; one line per design appended to the results file.
//
//   node --import tsx bench/skill-reading.mts --label detours-0.3 --set warmstart.skillDetours=0.3
//   node --import tsx bench/skill-reading.mts --label baseline --seed 2
//   node --import tsx bench/skill-reading.mts --label numbered --numbered-moves --set warmstart.skillDetours=0.3
//
// --numbered-moves is a probe, not a run setting: it replaces the sokoban oracle's won-episode skill in this process
// by its numbered form (envs/sokoban sokobanSkill), for the warm-start's skills and the check's alike.
import { appendFileSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { evaluate, loadPolicy } from '../compute/index.ts'
import { formatSkillGap, skillGap } from '../compute/skill-gap.ts'
import { warmstart, warmstartSettings } from '../compute/warmstart.ts'
import { createLocalEngine } from '../engine/index.ts'
import { ENVS } from '../envs/index.ts'
import { sokobanMoves, sokobanSkill } from '../envs/sokoban/index.ts'
import { writeCheckpointFolder } from '../policy/gguf/gguf-import.ts'
import { RunConfigSchema } from '../seed/config.ts'
import { cpuSokobanPreset } from '../seed/presets/cpu.ts'

const { values: args } = parseArgs({
  options: {
    label: { type: 'string' },
    seed: { type: 'string', default: '1' },
    set: { type: 'string', multiple: true, default: [] },
    tasks: { type: 'string', default: '200' },
    'eval-tasks': { type: 'string', default: '500' },
    threads: { type: 'string', default: '2' },
    out: { type: 'string', default: 'bench/results/skill-reading.jsonl' },
    keep: { type: 'string', describe: 'a folder to write the checkpoint to' },
    'numbered-moves': { type: 'boolean', default: false },
  },
})
if (!args.label) throw new Error('--label <name> names the design in the results file')

/** `warmstart.<field>=<JSON scalar>` and `model.<field>=…` overrides of the preset. */
function withOverrides(base: ReturnType<typeof cpuSokobanPreset>, sets: readonly string[]) {
  const parts: Record<'warmstart' | 'model', Record<string, unknown>> = {
    warmstart: { ...base.warmstart },
    model: { ...base.model },
  }
  for (const s of sets) {
    const m = /^(warmstart|model)\.(\w+)=(.+)$/.exec(s)
    if (!m) throw new Error(`--set ${s}: expected warmstart.<field>=<value> or model.<field>=<value>`)
    parts[m[1] as 'warmstart' | 'model'][m[2] as string] = JSON.parse(m[3] as string)
  }
  // the run config's own checks, so a design is a setting a run could have
  return RunConfigSchema.parse({ ...base, ...parts })
}

if (args['numbered-moves']) {
  const plain = ENVS.sokoban.oracle.bind(ENVS.sokoban)
  ENVS.sokoban.oracle = (t) => {
    const a = plain(t)
    return t.info.won ? { ...a, output: { ...a.output, episode_skill: sokobanSkill(sokobanMoves(t), true) } } : a
  }
}

const seed = Number(args.seed)
const config = withOverrides({ ...cpuSokobanPreset(), seed }, args.set ?? [])
if (config.model.kind !== 'builtin' || !config.warmstart) throw new Error('the CPU sokoban preset is built-in')
const engine = createLocalEngine({ threads: Number(args.threads) })
const started = performance.now()
let demoSeconds = 0
const checks: Array<{ step: number; successRate: number }> = []
const r = await warmstart(engine, {
  // what the warm-start phase passes (micro-batches and the analyzer's budget included)
  ...warmstartSettings(config, config.warmstart),
  model: config.model,
  onDemonstration: (n, of) => {
    demoSeconds = (performance.now() - started) / 1000
    if (n % 500 === 0 || n === of) process.stderr.write(`demonstrations ${n}/${of} (${demoSeconds.toFixed(0)} s)\n`)
  },
  onCheck: (c) => {
    checks.push({ step: c.step, successRate: c.successRate })
    process.stderr.write(`step ${c.step}: validation success ${(100 * c.successRate).toFixed(1)}%\n`)
  },
})
const warmstartSeconds = (performance.now() - started) / 1000
process.stderr.write(`warm-start: ${warmstartSeconds.toFixed(0)} s (demonstrations ${demoSeconds.toFixed(0)} s)\n`)
if (args.keep) {
  mkdirSync(args.keep, { recursive: true })
  await writeCheckpointFolder(args.keep, r.checkpoint)
}
const policy = loadPolicy(engine, r.checkpoint, { settings: config.engine })
const gap = await skillGap(policy, {
  env: config.env,
  split: 'validation',
  seedStart: 0,
  tasks: Number(args.tasks),
  prompt: config.prompt,
  thoughts: config.warmstart.expertThoughts ?? false,
})
process.stdout.write(`${formatSkillGap(gap)}\n`)
const evalTasks = Number(args['eval-tasks'])
const evaluation = await evaluate(policy, {
  env: config.env,
  split: 'validation',
  seedStart: 10_000,
  tasks: evalTasks,
  temperature: config.evaluation.temperature,
  maxEnvSteps: config.evaluation.maxEnvSteps,
  prompt: config.prompt,
  seed,
})
const success = evaluation.aggregates.success.value
process.stdout.write(`validation success (seeds 10000:${10_000 + evalTasks}): ${(100 * (success ?? 0)).toFixed(1)}%\n`)
await policy.trainer.release()
await engine.close()
const line = {
  label: args.label,
  date: new Date().toISOString(),
  seed,
  set: args.set,
  ...(args['numbered-moves'] ? { numberedMoves: true } : {}),
  warmstart: {
    seconds: warmstartSeconds,
    demonstrationSeconds: demoSeconds,
    steps: r.stats,
    checks,
  },
  skillGap: gap,
  validationSuccess: { tasks: evalTasks, seedStart: 10_000, success },
}
mkdirSync(join(args.out, '..'), { recursive: true })
appendFileSync(args.out, `${JSON.stringify(line)}\n`)
process.stdout.write(`appended to ${args.out}\n`)
