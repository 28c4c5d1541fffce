// Rollout (docs/algorithm.md §3): B tasks × N samples, the group sharing its task, multi-turn, one batched
// generate call per turn over every live episode. Every env step becomes one step sample with its prompt and
// response tokens, the sampler's log-probs, the parsed action, validity and reward.
import { getEnv } from '../envs/index.ts'
import { type EpisodeOpener, type PlayedEpisode, played } from '../envs/played.ts'
import { mixSeed, mulberry32 } from '../envs/rng.ts'
import type { TaskRef, Trajectory } from '../envs/types.ts'
import { generate } from '../policy/generate.ts'
import type { PromptSettings } from '../seed/config.ts'
import { ENV_STOP_STRINGS, type RunEnvName } from '../seed/config.ts'
import { episodeSkillBlock, type FitTally, tallyFits } from '../seed/index.ts'
import { CorePhaseError, type Policy } from './policy.ts'
import { type FittedPrompt, fitPrompt, stepPromptText } from './prompts.ts'

export interface RolloutStep {
  /** The ordinary step prompt (history window applied, no skill, before fitting): the teacher prompt's base. */
  promptText: string
  /**
   * The fitted acting prompt, with the acting skill when the row puts one in the prompt. What the policy saw is
   * `promptIds`: this text's tokenization, less `promptTokensCut` leftmost ids where `left` truncation cut it.
   */
  actingPrompt: string
  promptIds: number[]
  responseIds: number[]
  /** log π_old of each response token as the sampler drew it (temperature-scaled). */
  samplerLogprobs: number[]
  responseText: string
  action: string | null
  valid: boolean
  /** The environment's reward for this step (no invalid-action penalty: that is the advantage's). */
  reward: number
  /** The skill inserted into the acting prompt, if any (under `left` truncation, perhaps cut with the rest). */
  skill: string | null
  /** History entries the budget left out of the acting prompt. */
  historyDropped: number
  /** Leftmost tokens `left` truncation cut from the acting prompt (docs/algorithm.md §13); absent when none. */
  promptTokensCut?: number
  /** The environment expert's action in the state the step was taken from (diagnostics: teacher gaps). */
  expertAction: string
}

export interface RolloutTrajectory {
  /** Index in the rollout (0 … B·N − 1); group = task index, sample = 0 … N − 1. */
  id: number
  group: number
  sample: number
  task: TaskRef
  steps: RolloutStep[]
  /** The environment's record of the episode (observations, responses, validity), for the analyzer. */
  trajectory: Trajectory
  won: boolean
  score: number
  totalReward: number
}

export interface RolloutInput {
  env: RunEnvName
  tasks: readonly TaskRef[]
  /** N: samples per task. */
  groupSize: number
  maxEnvSteps: number
  temperature: number
  prompt: PromptSettings
  /** Seeds the per-episode sampling streams: episode e samples from mixSeed(seed, e). */
  seed: number
  /**
   * The global task (group) index of each task (a shard's tasks within its iteration); absent: 0, 1, ….
   * Episode e = group · groupSize + sample numbers the trajectory and seeds its stream, so how the tasks were
   * split into shards does not change any episode.
   */
  groups?: readonly number[]
  /** A skill per task for rows whose acting prompt carries one (`skill-grpo`, `skill-prompt` evaluation). */
  actingSkills?: readonly (string | null)[]
  /** Most episodes per generate call (default: all live episodes). */
  maxBatch?: number
  /** Called after every generate call with the episodes finished so far (progress lines, heartbeats). */
  onProgress?: (finished: number, episodes: number) => void
  /**
   * Where the episodes live: default, the built-in environment `env` in this process; else these (a remote
   * server's: envs/http/remote-episode.ts), stepped together per turn so that a slow one holds up no other.
   * `env` still gives the stop strings and the step cap.
   */
  episodes?: EpisodeOpener
}

export interface RolloutStats {
  episodes: number
  successRate: number
  meanScore: number
  meanReward: number
  meanLength: number
  stepSamples: number
  invalidRate: number
  truncation: FitTally
  newTokens: number
  seconds: number
}

export interface RolloutResult {
  trajectories: RolloutTrajectory[]
  stats: RolloutStats
}

/** Plays B·N episodes with the policy; deterministic for a given seed and weights (with one ORT thread). */
export async function rollout(policy: Policy, input: RolloutInput): Promise<RolloutResult> {
  const started = performance.now()
  const env = getEnv(input.env)
  if (input.maxEnvSteps > env.maxSteps)
    throw new CorePhaseError(`rollout: maxEnvSteps ${input.maxEnvSteps} exceeds ${env.name}'s cap ${env.maxSteps}`)
  if (input.actingSkills && input.actingSkills.length !== input.tasks.length) {
    throw new CorePhaseError(
      `rollout: ${input.actingSkills.length} acting skills for ${input.tasks.length} tasks (one per task)`,
    )
  }
  const { codec, model } = policy
  const budget = {
    maxPromptTokens: input.prompt.maxPromptTokens,
    responseTokens: input.prompt.maxResponseTokens,
    contextLength: model.config.maxPositions,
    truncation: input.prompt.truncation,
  }
  const stop = ENV_STOP_STRINGS[input.env]
  interface Live {
    id: number
    group: number
    sample: number
    task: TaskRef
    steps: RolloutStep[]
    episode: PlayedEpisode
    rng: ReturnType<typeof mulberry32>
    skill: string | null
  }
  if (input.groups && input.groups.length !== input.tasks.length)
    throw new CorePhaseError(`rollout: ${input.groups.length} group indices for ${input.tasks.length} tasks`)
  const open = input.episodes ?? (async (task: TaskRef) => played(env.reset(task)))
  const all: Live[] = await Promise.all(
    input.tasks.flatMap((task, at) => {
      const group = input.groups?.[at] ?? at
      return Array.from({ length: input.groupSize }, async (_, sample) => {
        const id = group * input.groupSize + sample
        return {
          id,
          group,
          sample,
          task,
          steps: [],
          episode: await open(task),
          rng: mulberry32(mixSeed(input.seed, id)),
          skill: input.actingSkills?.[at] ?? null,
        }
      })
    }),
  )
  const fits: FittedPrompt[] = []
  let newTokens = 0
  const maxBatch = input.maxBatch ?? all.length
  for (;;) {
    const live = all.filter((e) => !e.episode.done && e.episode.stepCount < input.maxEnvSteps)
    if (live.length === 0) break
    for (let from = 0; from < live.length; from += maxBatch) {
      const batch = live.slice(from, from + maxBatch)
      const raw = await Promise.all(batch.map((e) => e.episode.prompt({ compact: input.prompt.compact })))
      const prompts = batch.map((e, i) => {
        const text = stepPromptText(raw[i] as string, input.prompt)
        const fit = fitPrompt(codec, text, budget, e.skill ? episodeSkillBlock(e.skill) : undefined)
        fits.push(fit)
        return { text, fit }
      })
      const out = await generate(
        model,
        prompts.map((p) => p.fit.ids),
        {
          maxNewTokens: input.prompt.maxResponseTokens,
          temperature: input.temperature,
          eosIds: codec.eosIds,
          stop,
          decode: codec.decode,
          rngs: batch.map((e) => e.rng),
        },
      )
      newTokens += out.stats.newTokens
      // every row's step at once: a remote environment answers them concurrently
      const stepped = await Promise.all(
        batch.map(async (e, i) => {
          const responseText = codec.decode(out.sequences[i]!.tokens)
          const expertAction = (await e.episode.expertAction()) ?? ''
          return { responseText, expertAction, result: await e.episode.step(responseText) }
        }),
      )
      batch.forEach((e, i) => {
        const gen = out.sequences[i]!
        const p = prompts[i]!
        const { responseText, expertAction, result } = stepped[i]!
        e.steps.push({
          promptText: p.text,
          actingPrompt: p.fit.prompt,
          promptIds: p.fit.ids,
          responseIds: gen.tokens,
          samplerLogprobs: gen.logprobs,
          responseText,
          action: result.action,
          valid: result.valid,
          reward: result.reward,
          skill: e.skill && !p.fit.blockDropped ? e.skill : null,
          historyDropped: p.fit.dropped,
          ...(p.fit.tokensCut > 0 ? { promptTokensCut: p.fit.tokensCut } : {}),
          expertAction,
        })
      })
      input.onProgress?.(
        all.filter((e) => e.episode.done || e.episode.stepCount >= input.maxEnvSteps).length,
        all.length,
      )
    }
  }
  const trajectories: RolloutTrajectory[] = await Promise.all(
    all.map(async (e) => {
      const t = await e.episode.trajectory()
      await e.episode.close()
      const { id, group, sample, task, steps } = e
      return {
        id,
        group,
        sample,
        task,
        steps,
        trajectory: t,
        won: t.info.won,
        score: t.info.score,
        totalReward: t.totalReward,
      }
    }),
  )
  const samples = trajectories.flatMap((t) => t.steps)
  const n = Math.max(1, trajectories.length)
  return {
    trajectories,
    stats: {
      episodes: trajectories.length,
      successRate: trajectories.filter((t) => t.won).length / n,
      meanScore: trajectories.reduce((a, t) => a + t.score, 0) / n,
      meanReward: trajectories.reduce((a, t) => a + t.totalReward, 0) / n,
      meanLength: samples.length / n,
      stepSamples: samples.length,
      invalidRate: samples.filter((s) => !s.valid).length / Math.max(1, samples.length),
      truncation: tallyFits(fits),
      newTokens,
      seconds: (performance.now() - started) / 1000,
    },
  }
}

/** The train-split task refs of one RL step: B distinct seeds drawn from the split's seed range. */
export function sampleTasks(
  env: RunEnvName,
  split: TaskRef['split'],
  count: number,
  seed: number,
  seedRange = 2 ** 16,
): TaskRef[] {
  const e = getEnv(env)
  const rng = mulberry32(seed)
  const seeds = new Set<number>()
  while (seeds.size < Math.min(count, seedRange)) seeds.add(Math.floor(rng.next() * seedRange))
  return [...seeds].map((s) => e.task(split, s))
}
