// Rollout (docs/algorithm.md §3): B tasks × N samples, the group sharing its task, multi-turn, one batched
// generate call per turn over every live episode. Every env step becomes one step sample with its prompt and
// response tokens, the sampler's log-probs, the parsed action, validity and reward.
import { EnvHttpError } from '../envs/http/index.ts'
import type { ExpertMove, PlayedEpisode } from '../envs/played.ts'
import { mixSeed, mulberry32 } from '../envs/rng.ts'
import type { TaskRef, Trajectory } from '../envs/types.ts'
import { generate } from '../policy/generate.ts'
import type { PromptSettings, RunEnvSpec } from '../seed/config.ts'
import { episodeSkillBlock, type FitTally, tallyFits } from '../seed/index.ts'
import { environmentOf } from './environment.ts'
import { CorePhaseError, type Policy } from './policy.ts'
import { type FittedPrompt, fitPrompt, stepBudget, stepPromptText } from './prompts.ts'

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
  /** Set when the environment failed the episode (a remote server's timeout, 5xx, …): it has no steps, unsolved. */
  failure?: EpisodeFailure
}

/** Why an environment failed an episode. */
export interface EpisodeFailure {
  /** The client's failure kind (EnvHttpError.kind). */
  kind: string
  message: string
  /** Steps it had taken (none of them is kept). */
  afterSteps: number
}

/** The record of an episode the environment failed: nothing of it is known. */
function failedTrajectory(env: string, task: TaskRef): Trajectory {
  return {
    env,
    task: { ...task },
    taskText: '',
    steps: [],
    finalObservation: '',
    info: { won: false, score: 0, family: '' },
    totalReward: 0,
  }
}

export interface RolloutInput {
  /** A built-in environment's name, or a server's (its episodes stepped together per turn, so a slow one holds up no other). */
  env: RunEnvSpec
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
}

export interface RolloutStats {
  episodes: number
  successRate: number
  meanScore: number
  meanReward: number
  meanLength: number
  stepSamples: number
  /** Episodes the environment failed (a remote server's failures), counted as unsolved, with no step kept. */
  failedEpisodes: number
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
  const env = environmentOf(input.env)
  if (input.maxEnvSteps > env.maxSteps)
    throw new CorePhaseError(`rollout: maxEnvSteps ${input.maxEnvSteps} exceeds ${env.name}'s cap ${env.maxSteps}`)
  if (input.actingSkills && input.actingSkills.length !== input.tasks.length) {
    throw new CorePhaseError(
      `rollout: ${input.actingSkills.length} acting skills for ${input.tasks.length} tasks (one per task)`,
    )
  }
  const { codec, model } = policy
  const budget = stepBudget(input.prompt, model.config.maxPositions)
  interface Live {
    id: number
    group: number
    sample: number
    task: TaskRef
    steps: RolloutStep[]
    /** Null when it could not be opened. */
    episode: PlayedEpisode | null
    /** Why the environment failed it (it then ends, unsolved); null while it goes on. */
    failure: EpisodeFailure | null
    rng: ReturnType<typeof mulberry32>
    skill: string | null
  }
  /** Ends an episode whose environment failed (a remote server's typed failure); any other error is thrown. */
  const fail = async (e: Live, error: unknown): Promise<void> => {
    if (!(error instanceof EnvHttpError)) throw error
    e.failure ??= { kind: error.kind, message: error.message, afterSteps: e.steps.length }
    await e.episode?.close().catch(() => undefined)
  }
  if (input.groups && input.groups.length !== input.tasks.length)
    throw new CorePhaseError(`rollout: ${input.groups.length} group indices for ${input.tasks.length} tasks`)
  const all: Live[] = await Promise.all(
    input.tasks.flatMap((task, at) => {
      const group = input.groups?.[at] ?? at
      return Array.from({ length: input.groupSize }, async (_, sample): Promise<Live> => {
        const id = group * input.groupSize + sample
        const live: Live = {
          id,
          group,
          sample,
          task,
          steps: [],
          episode: null,
          failure: null,
          rng: mulberry32(mixSeed(input.seed, id)),
          skill: input.actingSkills?.[at] ?? null,
        }
        try {
          live.episode = await env.open(task)
        } catch (error) {
          await fail(live, error)
        }
        return live
      })
    }),
  )
  const fits: FittedPrompt[] = []
  let newTokens = 0
  const maxBatch = input.maxBatch ?? all.length
  const ended = (e: Live) =>
    e.failure !== null || !e.episode || e.episode.done || e.episode.stepCount >= input.maxEnvSteps
  for (;;) {
    const live = all.filter((e) => !ended(e))
    if (live.length === 0) break
    for (let from = 0; from < live.length; from += maxBatch) {
      const asked = live.slice(from, from + maxBatch)
      // the prompt and the expert's move in the state the step is taken from, asked together (one round trip)
      const answers = new Map<Live, [string, ExpertMove | null]>()
      await Promise.all(
        asked.map(async (e) => {
          try {
            answers.set(
              e,
              await Promise.all([e.episode!.prompt({ compact: input.prompt.compact }), e.episode!.expert()]),
            )
          } catch (error) {
            await fail(e, error)
          }
        }),
      )
      // an episode whose server failed leaves the batch here; the others go on
      const batch = asked.filter((e) => answers.has(e))
      if (batch.length === 0) continue
      const prompts = batch.map((e) => {
        const text = stepPromptText(answers.get(e)![0], input.prompt)
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
          stop: env.stop,
          decode: codec.decode,
          rngs: batch.map((e) => e.rng),
        },
      )
      newTokens += out.stats.newTokens
      // every row's step at once: a remote environment answers them concurrently
      const stepped = await Promise.all(
        batch.map(async (e, i) => {
          const responseText = codec.decode(out.sequences[i]!.tokens)
          const expertAction = answers.get(e)![1]?.action ?? ''
          try {
            return { responseText, expertAction, result: await e.episode!.step(responseText) }
          } catch (error) {
            await fail(e, error)
            return null
          }
        }),
      )
      batch.forEach((e, i) => {
        const step = stepped[i]
        if (!step) return
        const gen = out.sequences[i]!
        const p = prompts[i]!
        const { responseText, expertAction, result } = step
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
      input.onProgress?.(all.filter(ended).length, all.length)
    }
  }
  const trajectories: RolloutTrajectory[] = await Promise.all(
    all.map(async (e): Promise<RolloutTrajectory> => {
      const { id, group, sample, task } = e
      let t: Trajectory | null = null
      if (e.episode && !e.failure) {
        try {
          t = await e.episode.trajectory()
          await e.episode.close()
        } catch (error) {
          await fail(e, error)
        }
      }
      if (!t || e.failure) {
        // the episode's outcome is unknown: none of its steps is trained on, and it counts as not solved
        const failure = e.failure as EpisodeFailure
        return {
          id,
          group,
          sample,
          task,
          steps: [],
          trajectory: failedTrajectory(env.name, task),
          won: false,
          score: 0,
          totalReward: 0,
          failure,
        }
      }
      return {
        id,
        group,
        sample,
        task,
        steps: e.steps,
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
      failedEpisodes: trajectories.filter((t) => t.failure).length,
      invalidRate: samples.filter((s) => !s.valid).length / Math.max(1, samples.length),
      truncation: tallyFits(fits),
      newTokens,
      seconds: (performance.now() - started) / 1000,
    },
  }
}

/** The train-split task refs of one RL step: B distinct seeds drawn from the split's seed range. */
export function sampleTasks(
  env: RunEnvSpec,
  split: TaskRef['split'],
  count: number,
  seed: number,
  seedRange = 2 ** 16,
): TaskRef[] {
  const e = environmentOf(env)
  const rng = mulberry32(seed)
  const seeds = new Set<number>()
  while (seeds.size < Math.min(count, seedRange)) seeds.add(Math.floor(rng.next() * seedRange))
  return [...seeds].map((s) => e.task(split, s))
}
