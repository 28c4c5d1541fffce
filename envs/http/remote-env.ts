// An environment on a server that speaks the environment protocol (docs/environment-protocol.md), played through
// the run's face (envs/played.ts). /create and /reset open an episode, /step plays it. What the server says of
// itself (`GET /info`, asked once) names the optional routes it has: seedflow's /prompt and /trajectory, the
// expert (/expert_action) and the oracle (/oracle). Without /prompt the step prompt is rendered here from the
// observations (the run's `prompt.instruction`); without /trajectory the episode's record is the one kept here.
import { historyWindow, renderHistory } from '../core.ts'
import type { ExpertMove, PlayedEnv, PlayedEpisode } from '../played.ts'
import { pick, type Rng } from '../rng.ts'
import type {
  EpisodeInfo,
  OracleAnalysis,
  PromptOptions,
  Split,
  StepRecord,
  StepResult,
  TaskRef,
  Trajectory,
} from '../types.ts'
import { EnvHttpError, type HttpEnvClient, type ServerInfo } from './client.ts'

export interface RemoteEnvOptions {
  /** The environment's name in trajectories and reports. */
  name: string
  maxSteps: number
  stop: readonly string[]
  /** A demonstration's response: `{action}` and `{thought}` replaced. */
  responseFormat: string
  /** The step prompt for a server without /prompt. */
  prompt?: { instruction: string; historyLength: number }
  /** Each split's task range on the server: seed s is task `first + s mod count`. */
  splits?: Partial<Record<Split, { first: number; count: number }>>
}

/** The optional routes, as /info lists them. */
export const OPTIONAL_ROUTES = ['prompt', 'trajectory', 'expert_action', 'oracle'] as const
export type OptionalRoute = (typeof OPTIONAL_ROUTES)[number]

/** A run needs a route the server does not have (and nothing stands in for it). */
export class MissingRouteError extends Error {
  override name = 'MissingRouteError'
  constructor(
    readonly baseUrl: string,
    readonly route: OptionalRoute,
    need: string,
  ) {
    super(`the environment server at ${baseUrl} has no /${route} route (its GET /info does not list it): ${need}`)
  }
}

export class RemoteEnv implements PlayedEnv {
  #info: Promise<ServerInfo> | undefined

  constructor(
    readonly client: HttpEnvClient,
    private readonly options: RemoteEnvOptions,
  ) {}

  get name(): string {
    return this.options.name
  }

  get maxSteps(): number {
    return this.options.maxSteps
  }

  get stop(): readonly string[] {
    return this.options.stop
  }

  /** What the server says of itself, asked once (again after a failure). */
  info(): Promise<ServerInfo> {
    this.#info ??= this.client.info().catch((error) => {
      this.#info = undefined
      throw error
    })
    return this.#info
  }

  /** Whether the server has an optional route. */
  async has(route: OptionalRoute): Promise<boolean> {
    return (await this.info()).routes.includes(route)
  }

  task(split: Split, seed: number): TaskRef {
    if (!Number.isSafeInteger(seed) || seed < 0)
      throw new RangeError(`seed must be a non-negative integer, got ${seed}`)
    return { split, seed }
  }

  /** The server's task of a seed: its split's range applied. */
  serverSeed(task: TaskRef): number {
    const range = this.options.splits?.[task.split]
    return range ? range.first + (task.seed % range.count) : task.seed
  }

  async open(task: TaskRef): Promise<PlayedEpisode> {
    const info = await this.info()
    const has = (route: OptionalRoute) => info.routes.includes(route)
    if (!has('prompt') && !this.options.prompt)
      throw new MissingRouteError(this.client.baseUrl, 'prompt', 'give the run config env.prompt.instruction')
    const sent = { split: task.split, seed: this.serverSeed(task) }
    const id = await this.client.create(sent)
    const first = await this.client.reset(id, sent).catch(async (error: unknown) => {
      await this.client.close(id).catch(() => undefined)
      throw error
    })
    return new RemoteEpisode(this.client, id, task, first.observation, first.done, {
      name: this.options.name,
      maxSteps: this.options.maxSteps,
      prompt: has('prompt') ? null : (this.options.prompt ?? null),
      trajectory: has('trajectory'),
      expert: has('expert_action'),
    })
  }

  formatResponse(action: string, thought = ''): string {
    // one pass, so that an action or thought holding `{action}` or `{thought}` is not replaced again
    return this.options.responseFormat.replace(/\{(action|thought)\}/g, (_, field) =>
      field === 'action' ? action : thought,
    )
  }

  async oracle(trajectory: Trajectory): Promise<OracleAnalysis> {
    if (!(await this.has('oracle')))
      throw new MissingRouteError(this.client.baseUrl, 'oracle', 'the oracle annotator needs it')
    const r = await this.client.oracle(trajectory)
    return {
      output: { episode_summary: r.episode_summary, episode_skill: r.episode_skill },
      entities: r.entities ?? [],
      ...(r.rule ? { rule: r.rule } : {}),
    }
  }
}

/** What an episode knows of its server. */
interface EpisodeSettings {
  name: string
  maxSteps: number
  /** Render the prompt here with this (the server has no /prompt), or null: ask the server. */
  prompt: { instruction: string; historyLength: number } | null
  trajectory: boolean
  expert: boolean
}

/** One episode on the server; it keeps its own record of the steps (the trajectory of a server without one). */
export class RemoteEpisode implements PlayedEpisode {
  #done: boolean
  #observation: string
  #info: EpisodeInfo = { won: false, score: 0, family: '' }
  #total = 0
  readonly #steps: StepRecord[] = []
  readonly #history: Array<{ observation: string; action: string }> = []

  constructor(
    private readonly client: HttpEnvClient,
    readonly id: number,
    readonly task: TaskRef,
    private readonly firstObservation: string,
    done: boolean,
    private readonly settings: EpisodeSettings,
  ) {
    this.#observation = firstObservation
    this.#done = done
  }

  get done(): boolean {
    return this.#done
  }

  get stepCount(): number {
    return this.#steps.length
  }

  async prompt(options: PromptOptions = {}): Promise<string> {
    const compact = options.compact ?? false
    if (!this.settings.prompt) {
      if (options.blind)
        throw new Error(
          `${this.settings.name}: a prompt without its observation (warmstart.skillBlind) needs the run's own prompt ` +
            'settings (env.prompt); the server renders its prompts (/prompt)',
        )
      return this.client.prompt(this.id, compact)
    }
    const window = historyWindow(options, this.settings.prompt.historyLength)
    // a server without /available_actions shows none; any other failure fails the episode, as a step's would
    const actions = await this.client.availableActions(this.id).catch((error: unknown) => {
      if (error instanceof EnvHttpError && error.kind === 'not-found' && /no route|not found/i.test(error.message))
        return null
      throw error
    })
    return renderPrompt(
      this.settings.prompt.instruction,
      window > 0 ? this.#history.slice(-window) : [],
      this.#steps.length,
      options.blind ? '' : this.#observation,
      actions,
    )
  }

  async step(response: string): Promise<StepResult> {
    const r = await this.client.step(this.id, response)
    const valid = r.info.valid ?? true
    const action = r.info.action ?? null
    const record: StepRecord = { observation: this.#observation, response, action, valid, reward: r.reward }
    if (r.info.reason !== undefined) record.reason = r.info.reason
    this.#steps.push(record)
    this.#history.push({ observation: this.#observation, action: action ?? response.slice(-30) })
    this.#observation = r.observation
    this.#total += r.reward
    this.#done = r.done || this.#steps.length >= this.settings.maxSteps
    this.#info = {
      won: r.info.won ?? false,
      score: r.info.score ?? (r.info.won ? 1 : 0),
      family: r.info.family ?? this.#info.family,
    }
    return {
      observation: r.observation,
      reward: r.reward,
      done: this.#done,
      valid,
      action,
      ...(r.info.reason === undefined ? {} : { reason: r.info.reason }),
      info: this.#info,
    }
  }

  async expert(): Promise<ExpertMove | null> {
    return this.settings.expert ? this.client.expert(this.id) : null
  }

  async randomAction(rng: Rng): Promise<string> {
    const actions = await this.client.availableActions(this.id)
    if (!actions || actions.length === 0)
      throw new Error(
        `${this.client.baseUrl}: episode ${this.id} lists no available actions (GET /available_actions), so no random action can be taken (warm-start mistakeRate and labelNoise need them)`,
      )
    return pick(rng, actions)
  }

  async trajectory(): Promise<Trajectory> {
    if (this.settings.trajectory) return this.client.trajectory(this.id)
    return {
      env: this.settings.name,
      task: { ...this.task },
      taskText: this.firstObservation,
      steps: this.#steps.map((s) => ({ ...s })),
      finalObservation: this.#observation,
      info: { ...this.#info },
      totalReward: this.#total,
    }
  }

  close(): Promise<void> {
    return this.client.close(this.id)
  }
}

/**
 * The step prompt of a server without /prompt: the instruction, the recent (observation, action) pairs in the
 * verl-agent history format (so a run's history window and prompt fitting find them), the current observation and
 * the admissible actions where the server lists them, then the turn line (where a skill goes when the instruction
 * has no task line).
 */
export function renderPrompt(
  instruction: string,
  history: ReadonlyArray<{ observation: string; action: string }>,
  stepCount: number,
  observation: string,
  actions: readonly string[] | null,
): string {
  const parts = [instruction.trim()]
  if (history.length > 0)
    parts.push(
      `Prior to this step, you have already taken ${stepCount} step(s). Below are the most recent ${history.length} observations and the corresponding actions you took:\n${renderHistory([...history], stepCount)}`,
    )
  parts.push(`You are now at step ${stepCount + 1} and your current observation is:\n${observation}`)
  if (actions && actions.length > 0)
    parts.push(`Your admissible actions of the current situation are: ${actions.join(', ')}.`)
  parts.push("Now it's your turn to take an action.")
  return parts.join('\n')
}
