// The premise check of a checkpoint (docs/benchmarks.md §3.8): does the policy read what a skill says? On held-out
// tasks the expert plays each episode; at every step the expert's whole response is scored with no skill, with the
// task's own oracle skill and with another task's, and with both reduced to their rule (the skill's instruction
// without the episode's moves, where the environment gives one). Own minus other is the statistic of
// docs/benchmarks.md §3.6 without a Stage 2 iteration: a policy that only notices that a skill is there scores both
// alike.
import type { Split } from '../envs/types.ts'
import type { PromptSettings } from '../seed/config.ts'
import type { RunEnvSpec } from '../seed/env-config.ts'
import { episodeSkillBlock } from '../seed/skill-context.ts'
import { environmentOf } from './environment.ts'
import type { Policy } from './policy.ts'
import { fitPrompt, stepBudget, stepPromptText } from './prompts.ts'
import { scoreAll } from './rescore.ts'

export interface SkillGapInput {
  env: RunEnvSpec
  split: Split
  seedStart: number
  tasks: number
  prompt: PromptSettings
  /** Whether the expert's responses carry its thought (the warm-start's `expertThoughts`). */
  thoughts: boolean
  batchSize?: number
  onProgress?: (done: number, of: number) => void
}

/** A mean over tasks (each task's mean over its steps) with its 95% interval, and how many tasks are above 0. */
export interface GapFigure {
  /** Mean over all scored steps (docs/benchmarks.md §3.6's statistic: per response). */
  perStep: number
  /** Mean over tasks of each task's mean over its steps, and the half-width of its 95% t-interval. */
  perTask: number
  half: number
  /** Tasks whose mean is above 0, of `tasks`. */
  positive: number
  tasks: number
}

export interface SkillGapResult {
  /** Tasks asked for, and those the expert won (only a won episode has the oracle skill of its solution). */
  tasks: number
  won: number
  steps: number
  /** Steps left out of a comparison because a prompt could not keep its skill block. */
  blockDropped: number
  /** Mean whole-response log-prob of the expert's response per step, by what the prompt carries. */
  logprob: { none: number; own: number; other: number; ownRule: number | null; otherRule: number | null }
  gaps: {
    /** Own oracle skill minus another task's: the premise statistic. */
    ownVsOther: GapFigure
    ownVsNone: GapFigure
    /** Own rule minus another task's rule (0 where every task's rule is the same text), and own rule minus none. */
    ruleOwnVsOther: GapFigure | null
    ruleVsNone: GapFigure | null
  }
  seconds: number
}

export interface ExpertStep {
  prompt: string
  /** The expert's move, and its whole response (with its thought when the input asks for it). */
  action: string
  response: string
}

export interface ExpertEpisode {
  steps: ExpertStep[]
  skill: string
  rule: string | undefined
}

const KINDS = ['none', 'own', 'other', 'ownRule', 'otherRule'] as const
type Kind = (typeof KINDS)[number]

/** The expert's won episodes of the tasks, with each one's oracle skill (lost ones are left out). */
export async function expertEpisodes(input: SkillGapInput): Promise<ExpertEpisode[]> {
  const env = environmentOf(input.env)
  const out: ExpertEpisode[] = []
  for (let i = 0; i < input.tasks; i++) {
    const episode = await env.open(env.task(input.split, input.seedStart + i))
    const steps: ExpertStep[] = []
    try {
      while (!episode.done) {
        const prompt = stepPromptText(await episode.prompt({ compact: input.prompt.compact }), input.prompt)
        const move = await episode.expert()
        if (!move) throw new Error(`${env.name} has no expert: the premise check scores the expert's responses`)
        steps.push({
          prompt,
          action: move.action,
          response: env.formatResponse(move.action, input.thoughts ? move.thought : ''),
        })
        await episode.step(env.formatResponse(move.action))
      }
      const trajectory = await episode.trajectory()
      if (!trajectory.info.won) continue
      const oracle = await env.oracle(trajectory)
      out.push({ steps, skill: oracle.output.episode_skill, rule: oracle.rule })
    } finally {
      await episode.close()
    }
  }
  return out
}

/** Mean over steps, and over tasks with a 95% t-interval, of `gap` (null: that step is not compared). */
function figure(perTask: Array<Array<number | null>>): GapFigure {
  const means: number[] = []
  let total = 0
  let steps = 0
  for (const task of perTask) {
    const xs = task.filter((x): x is number => x !== null)
    if (xs.length === 0) continue
    total += xs.reduce((s, x) => s + x, 0)
    steps += xs.length
    means.push(xs.reduce((s, x) => s + x, 0) / xs.length)
  }
  const n = means.length
  const mean = n > 0 ? means.reduce((s, x) => s + x, 0) / n : Number.NaN
  const sd = n > 1 ? Math.sqrt(means.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1)) : Number.NaN
  // the normal quantile: tasks number in the hundreds (the t quantile at 100 degrees of freedom is 1.98)
  return {
    perStep: steps > 0 ? total / steps : Number.NaN,
    perTask: mean,
    half: (1.96 * sd) / Math.sqrt(n),
    positive: means.filter((x) => x > 0).length,
    tasks: n,
  }
}

export async function skillGap(policy: Policy, input: SkillGapInput): Promise<SkillGapResult> {
  const started = performance.now()
  const episodes = await expertEpisodes(input)
  if (episodes.length < 2) throw new Error(`the premise check needs two won expert episodes, got ${episodes.length}`)
  const budget = stepBudget(input.prompt, policy.model.config.maxPositions)
  const blocks = (e: ExpertEpisode, other: ExpertEpisode): Record<Kind, string | null> => ({
    none: '',
    own: episodeSkillBlock(e.skill),
    other: episodeSkillBlock(other.skill),
    ownRule: e.rule ? episodeSkillBlock(e.rule) : null,
    otherRule: e.rule && other.rule ? episodeSkillBlock(other.rule) : null,
  })
  // every (episode, step, kind) scored once; a kind whose block is missing or dropped is not scored
  const items: Array<{ context: number[]; response: number[] }> = []
  const at: Array<Array<Record<Kind, number | null>>> = []
  let blockDropped = 0
  episodes.forEach((e, i) => {
    const kinds = blocks(e, episodes[(i + 1) % episodes.length] as ExpertEpisode)
    at.push(
      e.steps.map((s) => {
        const response = policy.codec.responseIds(s.response)
        const index = {} as Record<Kind, number | null>
        for (const kind of KINDS) {
          const block = kinds[kind]
          index[kind] = null
          if (block === null) continue
          const fit = fitPrompt(policy.codec, s.prompt, budget, block || undefined)
          if (block && fit.blockDropped) {
            blockDropped++
            continue
          }
          index[kind] = items.length
          items.push({ context: fit.ids, response })
        }
        return index
      }),
    )
  })
  let scored = 0
  const logprobs = await scoreAll(policy.model, items, {
    batchSize: input.batchSize ?? 64,
    temperature: 1,
    onBatch: (n) => {
      scored += n
      input.onProgress?.(scored, items.length)
    },
  })
  const whole = (index: number | null) => (index === null ? null : logprobs[index]!.reduce((s, x) => s + x, 0))
  const gap = (a: Kind, b: Kind) =>
    at.map((steps) =>
      steps.map((s) => {
        const x = whole(s[a])
        const y = whole(s[b])
        return x === null || y === null ? null : x - y
      }),
    )
  const mean = (kind: Kind) => {
    const xs = at
      .flat()
      .map((s) => whole(s[kind]))
      .filter((x): x is number => x !== null)
    return xs.length > 0 ? xs.reduce((s, x) => s + x, 0) / xs.length : null
  }
  const rules = episodes.every((e) => e.rule !== undefined)
  return {
    tasks: input.tasks,
    won: episodes.length,
    steps: at.flat().length,
    blockDropped,
    logprob: {
      none: mean('none') ?? Number.NaN,
      own: mean('own') ?? Number.NaN,
      other: mean('other') ?? Number.NaN,
      ownRule: rules ? mean('ownRule') : null,
      otherRule: rules ? mean('otherRule') : null,
    },
    gaps: {
      ownVsOther: figure(gap('own', 'other')),
      ownVsNone: figure(gap('own', 'none')),
      ruleOwnVsOther: rules ? figure(gap('ownRule', 'otherRule')) : null,
      ruleVsNone: rules ? figure(gap('ownRule', 'none')) : null,
    },
    seconds: (performance.now() - started) / 1000,
  }
}

/** The result as lines a reader takes in at once. */
export function formatSkillGap(r: SkillGapResult): string {
  const f = (g: GapFigure | null) =>
    g
      ? `${g.perStep >= 0 ? '+' : ''}${g.perStep.toFixed(3)} nats per response (per task ${g.perTask.toFixed(3)} ± ${g.half.toFixed(3)}, above 0 in ${g.positive} of ${g.tasks} tasks)`
      : 'n/a (the environment gives no rule)'
  const lp = (x: number | null) => (x === null ? 'n/a' : x.toFixed(3))
  return [
    `premise check: ${r.won} of ${r.tasks} tasks won by the expert, ${r.steps} steps, ${r.blockDropped} skill blocks dropped (${r.seconds.toFixed(1)} s)`,
    `  log-prob of the expert's response: no skill ${lp(r.logprob.none)}, own skill ${lp(r.logprob.own)}, another task's ${lp(r.logprob.other)}, own rule ${lp(r.logprob.ownRule)}, another's rule ${lp(r.logprob.otherRule)}`,
    `  own skill − another task's: ${f(r.gaps.ownVsOther)}`,
    `  own skill − no skill:       ${f(r.gaps.ownVsNone)}`,
    `  own rule − another's rule:  ${f(r.gaps.ruleOwnVsOther)}`,
    `  own rule − no skill:        ${f(r.gaps.ruleVsNone)}`,
  ].join('\n')
}
