// Why the premise check's gap is small (issue 46, docs/benchmarks.md §3.8): does a sokoban checkpoint follow an edit
// of its skill? On held-out tasks the expert plays each episode; at step k the task's own oracle skill is edited so
// that its move at position j (j = k−1, k, k+1) says another action b, and the response "b" is scored under the
// edited skill and under the own one. A policy that reads move k of its skill moves toward b when j = k and not
// when j = k ± 1; one that ignores the skill moves for neither. Also: how often b becomes the most likely of the
// four moves under the edit at k (the follow rate), against how often the expert's move is the most likely under
// the own skill.
//
//   node --import tsx bench/skill-follow.mts --label numbered-720 --checkpoint .scratch/ckpt --numbered-moves
import { appendFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { loadPolicy } from '../compute/index.ts'
import { fitPrompt, stepBudget } from '../compute/prompts.ts'
import { scoreAll } from '../compute/rescore.ts'
import { type ExpertEpisode, expertEpisodes } from '../compute/skill-gap.ts'
import { createLocalEngine } from '../engine/index.ts'
import { ENVS } from '../envs/index.ts'
import { ACTIONS, sokobanSkill } from '../envs/sokoban/index.ts'
import { importHuggingFaceFolder } from '../policy/hf-import.ts'
import { cpuSokobanPreset } from '../seed/presets/cpu.ts'
import { episodeSkillBlock } from '../seed/skill-context.ts'

const { values: args } = parseArgs({
  options: {
    label: { type: 'string' },
    checkpoint: { type: 'string' },
    'numbered-moves': { type: 'boolean', default: false },
    tasks: { type: 'string', default: '200' },
    threads: { type: 'string', default: '2' },
    out: { type: 'string', default: 'bench/results/skill-follow.jsonl' },
  },
})
if (!args.label || !args.checkpoint)
  throw new Error('--label <name> --checkpoint <folder> (bench/skill-reading --keep)')
const numbered = args['numbered-moves'] ?? false
const config = cpuSokobanPreset()
const env = ENVS.sokoban
const engine = createLocalEngine({ threads: Number(args.threads) })
const policy = loadPolicy(engine, (await importHuggingFaceFolder(args.checkpoint)).checkpoint, {
  settings: config.engine,
})
const thoughts = config.warmstart?.expertThoughts ?? false
const episodes: ExpertEpisode[] = await expertEpisodes({
  env: config.env,
  split: 'validation',
  seedStart: 0,
  tasks: Number(args.tasks),
  prompt: config.prompt,
  thoughts,
})
const budget = stepBudget(config.prompt, policy.model.config.maxPositions)
const OFFSETS = [-1, 0, 1] as const

// items: (prompt with a skill, response) pairs to score; per step, where each comparison's scores sit
const items: Array<{ context: number[]; response: number[] }> = []
const add = (prompt: string, skill: string, action: string) => {
  const fit = fitPrompt(policy.codec, prompt, budget, episodeSkillBlock(skill))
  if (fit.blockDropped) throw new Error('a skill block was dropped: the comparison needs every block kept')
  items.push({ context: fit.ids, response: policy.codec.responseIds(env.formatResponse(action, '')) })
  return items.length - 1
}
interface Edit {
  offset: number
  b: string
  edited: number
  own: number
  /** offset 0: the four moves under the edit, in ACTIONS order */
  all?: number[]
}
const steps: Array<{ own: number[]; expert: string; edits: Edit[] }> = []
for (const e of episodes) {
  const moves = e.steps.map((s) => s.action)
  const ownSkill = sokobanSkill(moves, numbered)
  e.steps.forEach((s, k) => {
    const own = ACTIONS.map((a) => add(s.prompt, ownSkill, a))
    const edits: Edit[] = []
    for (const offset of OFFSETS) {
      const j = k + offset
      if (j < 0 || j >= moves.length) continue
      for (const b of ACTIONS) {
        if (b === s.action || b === moves[j]) continue
        const skill = sokobanSkill(
          moves.map((m, i) => (i === j ? b : m)),
          numbered,
        )
        const all = offset === 0 ? ACTIONS.map((a) => add(s.prompt, skill, a)) : undefined
        edits.push({
          offset,
          b,
          edited: all ? (all[ACTIONS.indexOf(b)] as number) : add(s.prompt, skill, b),
          own: own[ACTIONS.indexOf(b)] as number,
          ...(all ? { all } : {}),
        })
      }
    }
    steps.push({ own, expert: s.action, edits })
  })
}
process.stderr.write(`${episodes.length} episodes, ${steps.length} steps, ${items.length} responses to score\n`)
let done = 0
const lp = await scoreAll(policy.model, items, {
  batchSize: 64,
  temperature: 1,
  onBatch: (n) => {
    done += n
    if (done % 3200 < 64) process.stderr.write(`scored ${done}/${items.length}\n`)
  },
})
const whole = (i: number) => (lp[i] as Float64Array).reduce((s, x) => s + x, 0)
const argmax = (xs: number[]) => xs.reduce((best, x, i) => (x > (xs[best] as number) ? i : best), 0)
const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length

const byOffset = Object.fromEntries(
  OFFSETS.map((o) => {
    const es = steps.flatMap((s) => s.edits.filter((e) => e.offset === o))
    return [
      String(o),
      {
        edits: es.length,
        // log p(b | skill edited at k+o) − log p(b | own skill), nats per response
        shift: mean(es.map((e) => whole(e.edited) - whole(e.own))),
        probEdited: mean(es.map((e) => Math.exp(whole(e.edited)))),
        probOwn: mean(es.map((e) => Math.exp(whole(e.own)))),
      },
    ]
  }),
)
const atK = steps.flatMap((s) => s.edits.filter((e) => e.all))
const followRate = mean(atK.map((e) => (ACTIONS[argmax((e.all as number[]).map(whole))] === e.b ? 1 : 0)))
const expertTop = mean(steps.map((s) => (ACTIONS[argmax(s.own.map(whole))] === s.expert ? 1 : 0)))
const result = {
  label: args.label,
  date: new Date().toISOString(),
  numbered,
  steps: steps.length,
  byOffset,
  followRate,
  expertTop,
}
const pct = (x: number) => `${(100 * x).toFixed(1)}%`
for (const o of OFFSETS) {
  const f = byOffset[String(o)] as { edits: number; shift: number; probEdited: number; probOwn: number }
  process.stdout.write(
    `edit at k${o === 0 ? '' : o > 0 ? '+1' : '−1'}: log p(b) moves ${f.shift >= 0 ? '+' : ''}${f.shift.toFixed(3)} nats; ` +
      `p(b) ${pct(f.probOwn)} → ${pct(f.probEdited)} (${f.edits} edits)\n`,
  )
}
process.stdout.write(`follow rate (b the most likely move under the edit at k): ${pct(followRate)}\n`)
process.stdout.write(`the expert's move the most likely under the own skill: ${pct(expertTop)}\n`)
appendFileSync(args.out ?? 'bench/results/skill-follow.jsonl', `${JSON.stringify(result)}\n`)
await policy.trainer.release()
await engine.close()
