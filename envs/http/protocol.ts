// The AgentGym-style environment protocol shared by our server and client. Every body is JSON.
//   POST /create                       {split?, seed?}          → {id}
//   POST /reset                        {id, split?, seed?|data_idx?} → StepReply (done false, reward 0)
//   POST /step                         {id, action}             → StepReply   (action = the model's full output)
//   GET  /observation?id=              → {observation}
//   GET  /available_actions?id=        → {available_actions: string[] | null}
//   GET  /prompt?id=&compact=          → {prompt}                (seedflow extension: the verl-agent style prompt)
//   GET  /trajectory?id=               → Trajectory              (seedflow extension)
//   GET  /expert_action?id=            → {action}                (optional: the expert's next action, inner text)
//   POST /close                        {id}                     → {closed: true}
// Episode ids are what /create answered: non-negative integers, as a JSON number in a body (`{"id": 3}`, never
// `"3"` or `[3]`) and in plain decimal in a query (`?id=3`, never `0x3`, `3e0` or `03`); anything else is a 400.
// A server holds at most a cap of open episodes (ours: 1,024 by default) and evicts an episode no request has
// touched for an idle TTL (ours: 30 minutes); /create at the cap answers 429 (with Retry-After), and an evicted,
// closed or unknown id answers 404, saying which.
// Errors: {error} with 400 (bad request, bad id), 404 (unknown, closed or evicted id; unknown route), 409 (step
// after done), 413 (body too large), 429 (episode cap reached), 500.
import type { EpisodeInfo, Split } from '../types.ts'

export interface StepReply {
  observation: string
  /** AgentGym clients read `state`; it equals `observation`. */
  state: string
  reward: number
  done: boolean
  info: EpisodeInfo & { valid: boolean; reason?: string; action: string | null }
  /** `info.score`, where AgentGym's BabyAI and SciWorld clients read it. */
  score: number
  /** The admissible actions (null: the environment shows none), where AgentGym's ALFWorld client reads them. */
  available_actions: string[] | null
}

export interface CreateRequest {
  split?: Split
  seed?: number
}
