// The AgentGym-style environment protocol shared by our server and client. Every body is JSON.
//   POST /create                       {split?, seed?}          → {id}
//   POST /reset                        {id, split?, seed?|data_idx?} → StepReply (done false, reward 0)
//   POST /step                         {id, action}             → StepReply   (action = the model's full output)
//   GET  /observation?id=              → {observation}
//   GET  /available_actions?id=        → {available_actions: string[] | null}
//   GET  /prompt?id=&compact=          → {prompt}                (seedflow extension: the verl-agent style prompt)
//   GET  /trajectory?id=               → Trajectory              (seedflow extension)
//   POST /close                        {id}                     → {closed: true}
// Errors: {error} with 400 (bad request), 404 (unknown id or route), 409 (step after done), 500.
import type { EpisodeInfo, Split } from '../types.ts'

export interface StepReply {
  observation: string
  /** AgentGym clients read `state`; it equals `observation`. */
  state: string
  reward: number
  done: boolean
  info: EpisodeInfo & { valid: boolean; reason?: string; action: string | null }
}

export interface CreateRequest {
  split?: Split
  seed?: number
}
