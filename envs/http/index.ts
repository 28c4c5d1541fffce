export { EnvHttpError, HttpEnvClient, type HttpEnvClientOptions, type RemoteStep } from './client.ts'
export type { CreateRequest, StepReply } from './protocol.ts'
export { type ServedEnv, type ServeOptions, serveEnv } from './server.ts'
