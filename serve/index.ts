// `seedflow serve` composed: the checkpoint's policy on an engine, one compact decode batch, the scheduler, the
// metrics and the HTTP server. The CLI and the tests start serving through this one function.
import type { Engine } from '../engine/index.ts'
import type { Checkpoint } from '../policy/checkpoint.ts'
import { DecodeBatch } from '../policy/decode-batch.ts'
import { Trainer } from '../policy/trainer.ts'
import { createServeMetrics, type ServeMetrics } from './metrics.ts'
import { type DecodeStepper, Scheduler } from './scheduler.ts'
import { servedModel } from './served-model.ts'
import { type AccessLogEntry, type RunningServer, startServer } from './server.ts'

export { ApiError } from './errors.ts'
export type { AccessLogEntry, RunningServer } from './server.ts'
export { DEFAULT_MAX_BODY_BYTES } from './server.ts'

export const DEFAULT_BATCH_ROWS = 16
export const DEFAULT_CONTEXT = 2048
export const DEFAULT_MAX_QUEUE = 64

export interface ServeOptions {
  /** The name clients give as `model`. */
  name: string
  host?: string
  port?: number
  /** Rows of the decode batch: sequences decoded at once (default 16). */
  rows?: number
  /** Cache slots per row: prompt + max_tokens of a request (default min(2048, the model's positions)). */
  context?: number
  /** Requests waiting for rows at most (default 64); beyond, 429. */
  maxQueue?: number
  maxBodyBytes?: number
  /** Requests to /v1 need `Authorization: Bearer <apiKey>` when set. */
  apiKey?: string
  /** Origins browsers may call from (`*`: any); none by default (no CORS). */
  corsOrigins?: readonly string[]
  /** One entry per answered request (method, path, status, tokens, time; never the body or the key). */
  accessLog?: (entry: AccessLogEntry) => void
  /** Wraps the decode batch (tests pace its steps); the identity by default. */
  wrapBatch?: (batch: DecodeStepper) => DecodeStepper
}

export interface Serving extends RunningServer {
  metrics: ServeMetrics
  rows: number
  context: number
}

/** Starts serving `checkpoint` on `engine`; resolves once it listens. */
export async function serveCheckpoint(engine: Engine, checkpoint: Checkpoint, options: ServeOptions): Promise<Serving> {
  const model = servedModel(checkpoint, options.name)
  const rows = options.rows ?? DEFAULT_BATCH_ROWS
  const context = options.context ?? Math.min(DEFAULT_CONTEXT, checkpoint.config.maxPositions)
  const trainer = new Trainer(engine, checkpoint.config, checkpoint.weights)
  const policy = trainer.model
  const batch = new DecodeBatch(policy, { rows, capacity: context, sampling: 'auto', compact: true })
  const metrics = createServeMetrics()
  const scheduler = new Scheduler(options.wrapBatch ? options.wrapBatch(batch) : batch, {
    maxQueue: options.maxQueue ?? DEFAULT_MAX_QUEUE,
    metrics,
  })
  const server = await startServer(model, scheduler, metrics, {
    ...(options.host !== undefined ? { host: options.host } : {}),
    ...(options.port !== undefined ? { port: options.port } : {}),
    ...(options.maxBodyBytes !== undefined ? { maxBodyBytes: options.maxBodyBytes } : {}),
    ...(options.apiKey !== undefined ? { apiKey: options.apiKey } : {}),
    ...(options.corsOrigins !== undefined ? { corsOrigins: options.corsOrigins } : {}),
    ...(options.accessLog !== undefined ? { accessLog: options.accessLog } : {}),
  })
  return {
    ...server,
    metrics,
    rows,
    context,
    async close(graceMs: number) {
      await server.close(graceMs)
      await batch.close()
      await trainer.release()
    },
  }
}
