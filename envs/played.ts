// An environment as a run plays it, each call awaited: an environment that lives elsewhere (a server speaking the
// environment protocol, envs/http/remote-env.ts) answers over the network, and one slow step must not hold up the
// other rows of a decode batch, which the rollout steps together (docs/environment-protocol.md). A built-in
// environment is played through the same face (`playedEnv`), so the phases have one path for both.
import type { Rng } from './rng.ts'
import type { Env, Episode, OracleAnalysis, PromptOptions, Split, StepResult, TaskRef, Trajectory } from './types.ts'

/** The expert's next move: its action (inner text) and its sub-goal in a few words ('' where it states none). */
export interface ExpertMove {
  action: string
  thought: string
}

export interface PlayedEpisode {
  readonly task: TaskRef
  readonly done: boolean
  readonly stepCount: number
  /** The verl-agent style user message for the current step. */
  prompt(options?: PromptOptions): Promise<string>
  step(response: string): Promise<StepResult>
  /** The expert's next move where the environment has an expert, else null. */
  expert(): Promise<ExpertMove | null>
  /** A uniformly random valid action (the admissible list where there is one), for the warm-start's mistakes. */
  randomAction(rng: Rng): Promise<string>
  trajectory(): Promise<Trajectory>
  /** Frees the episode where it lives (a remote server's slot); the trajectory stays readable until then. */
  close(): Promise<void>
}

/** What a run needs of its environment, whichever kind it is. */
export interface PlayedEnv {
  /** The environment's name in trajectories and reports. */
  readonly name: string
  /** The step cap. */
  readonly maxSteps: number
  /** Where a response ends (generation stops after the first of these). */
  readonly stop: readonly string[]
  /** The task of a split and seed. */
  task(split: Split, seed: number): TaskRef
  /** Opens an episode of a task, reset to its first observation. */
  open(task: TaskRef): Promise<PlayedEpisode>
  /** Writes an action (and the expert's thought) as the model's response. */
  formatResponse(action: string, thought?: string): string
  /** A hindsight skill for a finished trajectory from facts visible in its text (Stage 1's oracle annotator). */
  oracle(trajectory: Trajectory): Promise<OracleAnalysis>
}

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
    expert: async () => ({ action: episode.expertAction(), thought: episode.expertThought() }),
    randomAction: async (rng) => episode.randomAction(rng),
    trajectory: async () => episode.trajectory(),
    close: async () => undefined,
  }
}

/** A built-in environment, played through the same face; `stop`: where its responses end. */
export function playedEnv(env: Env, stop: readonly string[]): PlayedEnv {
  return {
    name: env.name,
    maxSteps: env.maxSteps,
    stop,
    task: (split, seed) => env.task(split, seed),
    open: async (task) => played(env.reset(task)),
    formatResponse: (action, thought) => env.formatResponse(action, thought),
    oracle: async (trajectory) => env.oracle(trajectory),
  }
}
