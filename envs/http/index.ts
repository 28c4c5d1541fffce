export {
  type EnvFailure,
  EnvHttpError,
  HttpEnvClient,
  type HttpEnvClientOptions,
  type RemoteStep,
} from './client.ts'
export type { CreateRequest, StepReply } from './protocol.ts'
export { RemoteEpisode, remoteEpisodes } from './remote-episode.ts'
export {
  DEFAULT_IDLE_TTL_MS,
  DEFAULT_MAX_EPISODES,
  formatDuration,
  type ServedEnv,
  type ServeOptions,
  serveEnv,
} from './server.ts'
