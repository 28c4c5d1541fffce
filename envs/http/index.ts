export {
  type EnvFailure,
  EnvHttpError,
  HttpEnvClient,
  type HttpEnvClientOptions,
  type RemoteStep,
  type ServerInfo,
} from './client.ts'
export type { CreateRequest, StepReply } from './protocol.ts'
export {
  MissingRouteError,
  OPTIONAL_ROUTES,
  type OptionalRoute,
  RemoteEnv,
  type RemoteEnvOptions,
  RemoteEpisode,
  renderPrompt,
} from './remote-env.ts'
export {
  DEFAULT_IDLE_TTL_MS,
  DEFAULT_MAX_EPISODES,
  formatDuration,
  type ServedEnv,
  type ServeOptions,
  serveEnv,
} from './server.ts'
