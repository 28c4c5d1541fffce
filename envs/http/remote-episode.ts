// An episode on a remote environment server (docs/environment-protocol.md), played through the rollout's face
// (envs/played.ts): /create and /reset open it, /step plays it, seedflow's /prompt and /trajectory routes give
// the step's prompt and the episode's record. The expert (/expert_action) is optional: without it the rollout's
// expert diagnostics are empty.
import type { PlayedEpisode } from '../played.ts'
import type { EpisodeInfo, StepResult, TaskRef, Trajectory } from '../types.ts'
import { EnvHttpError, type HttpEnvClient } from './client.ts'

export class RemoteEpisode implements PlayedEpisode {
  #done = false
  #steps = 0
  #info: EpisodeInfo = { won: false, score: 0, family: '' }

  private constructor(
    private readonly client: HttpEnvClient,
    readonly id: number,
    readonly task: TaskRef,
    private readonly server: ServerRoutes,
  ) {}

  /**
   * A new episode of `task` on the server, reset to its first observation. `server`: what the episodes of one server
   * share of it (whether it has /expert_action, learnt at the first 404), so that no episode asks again.
   */
  static async open(
    client: HttpEnvClient,
    task: TaskRef,
    server: ServerRoutes = { expert: true },
  ): Promise<RemoteEpisode> {
    const id = await client.create({ split: task.split, seed: task.seed })
    const episode = new RemoteEpisode(client, id, task, server)
    const first = await client.reset(id, { split: task.split, seed: task.seed })
    episode.#done = first.done
    return episode
  }

  get done(): boolean {
    return this.#done
  }

  get stepCount(): number {
    return this.#steps
  }

  prompt(options: { compact?: boolean } = {}): Promise<string> {
    return this.client.prompt(this.id, options.compact ?? false)
  }

  async step(response: string): Promise<StepResult> {
    const r = await this.client.step(this.id, response)
    this.#steps++
    this.#done = r.done
    this.#info = {
      won: r.info.won ?? false,
      score: r.info.score ?? (r.info.won ? 1 : 0),
      family: r.info.family ?? this.#info.family,
    }
    return {
      observation: r.observation,
      reward: r.reward,
      done: r.done,
      valid: r.info.valid ?? true,
      action: r.info.action ?? null,
      ...(r.info.reason === undefined ? {} : { reason: r.info.reason }),
      info: this.#info,
    }
  }

  async expertAction(): Promise<string | null> {
    if (!this.server.expert) return null
    try {
      return await this.client.expertAction(this.id)
    } catch (error) {
      if (!(error instanceof EnvHttpError && error.kind === 'not-found' && /no route/.test(error.message))) throw error
      this.server.expert = false
      return null
    }
  }

  trajectory(): Promise<Trajectory> {
    return this.client.trajectory(this.id)
  }

  close(): Promise<void> {
    return this.client.close(this.id)
  }
}

/** Episodes of the server behind `client`, for a rollout's `episodes`. */
export function remoteEpisodes(client: HttpEnvClient): (task: TaskRef) => Promise<PlayedEpisode> {
  const server: ServerRoutes = { expert: true }
  return (task) => RemoteEpisode.open(client, task, server)
}

/** The optional routes a server was found to have. */
interface ServerRoutes {
  expert: boolean
}
