// What a rollout needs of an episode, each call awaited: an episode that lives elsewhere (a remote environment,
// envs/http/remote-episode.ts) answers over the network, and one slow step must not hold up the other rows of a
// decode batch, which the rollout steps together (docs/environment-protocol.md). A built-in episode is one at once.
import type { Episode, PromptOptions, StepResult, TaskRef, Trajectory } from './types.ts'

export interface PlayedEpisode {
  readonly task: TaskRef
  readonly done: boolean
  readonly stepCount: number
  /** The verl-agent style user message for the current step. */
  prompt(options?: PromptOptions): Promise<string>
  step(response: string): Promise<StepResult>
  /** The expert's next action where the environment has one (diagnostics), else null. */
  expertAction(): Promise<string | null>
  trajectory(): Promise<Trajectory>
  /** Frees the episode where it lives (a remote server's slot); the trajectory stays readable until then. */
  close(): Promise<void>
}

/** Opens an episode of a task, reset to its first observation. */
export type EpisodeOpener = (task: TaskRef) => Promise<PlayedEpisode>

/** A built-in episode, played through the same face. */
export function played(episode: Episode): PlayedEpisode {
  return {
    task: episode.task,
    get done() {
      return episode.done
    },
    get stepCount() {
      return episode.stepCount
    },
    prompt: async (options) => episode.prompt(options),
    step: async (response) => episode.step(response),
    expertAction: async () => episode.expertAction(),
    trajectory: async () => episode.trajectory(),
    close: async () => undefined,
  }
}
