// The OpenAI-compatible HTTP server (node:http): GET /v1/models, POST /v1/chat/completions and /v1/completions
// (whole or as server-sent events), GET /metrics and /health. Bodies and the queue are bounded; errors are
// OpenAI's shape with their status; `close` stops accepting (503), lets in-flight requests finish for a grace
// period, fails the rest (an error event on a stream, a 503 otherwise) and closes the listener. CORS answers
// browsers only for the origins configured (none by default); each answered request makes one access-log entry.
import { createHash, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { chatEndpoint, completionEndpoint, type Endpoint, type Limits, UnknownModel } from './endpoints.ts'
import { ApiError, RETRY_AFTER_SECONDS } from './errors.ts'
import { type ChoiceDelta, generationJobs } from './generation.ts'
import type { ServeMetrics } from './metrics.ts'
import type { Scheduler } from './scheduler.ts'
import type { ServedModel } from './served-model.ts'

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024

export interface ServerOptions {
  host?: string
  port?: number
  maxBodyBytes?: number
  /** When set, every /v1 request needs `Authorization: Bearer <apiKey>` (401 otherwise); /metrics and /health stay open. */
  apiKey?: string
  /** Origins browsers may call from (`*`: any); none by default: no CORS headers, preflights refused. */
  corsOrigins?: readonly string[]
  /** Called once per answered request; it never sees the body, the query string or the headers. */
  accessLog?: (entry: AccessLogEntry) => void
}

export interface AccessLogEntry {
  method: string
  /** Without the query string (a client may put a key there), control characters escaped, at most 200 characters. */
  path: string
  status: number
  promptTokens: number
  completionTokens: number
  ms: number
}

interface Outcome {
  route: string
  status: number
  promptTokens?: number
  completionTokens?: number
}

function loggedPath(url: string | undefined): string {
  const path = (url ?? '/').split('?')[0] as string
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it escapes
  const printable = path.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`)
  return printable.length > 200 ? `${printable.slice(0, 200)}…` : printable
}

const CORS_METHODS = 'GET, POST, OPTIONS'
const CORS_HEADERS = 'Authorization, Content-Type'
const CORS_MAX_AGE_S = 600

/** Sets CORS headers for an allowed origin; answers a preflight (true: nothing more to do). */
function cors(req: IncomingMessage, res: ServerResponse, origins: readonly string[]): boolean {
  const origin = req.headers.origin
  if (origins.length === 0 || origin === undefined) return false
  const any = origins.includes('*')
  if (!any && !origins.includes(origin)) return false
  res.setHeader('Access-Control-Allow-Origin', any ? '*' : origin)
  if (!any) res.setHeader('Vary', 'Origin')
  if (req.method !== 'OPTIONS' || req.headers['access-control-request-method'] === undefined) return false
  res.writeHead(204, {
    'Access-Control-Allow-Methods': CORS_METHODS,
    'Access-Control-Allow-Headers': req.headers['access-control-request-headers'] ?? CORS_HEADERS,
    'Access-Control-Max-Age': String(CORS_MAX_AGE_S),
  })
  res.end()
  return true
}

/** Compares the bearer token with the key in constant time (over their hashes, so lengths leak nothing either). */
function authorized(req: IncomingMessage, apiKey: string): boolean {
  const header = req.headers.authorization ?? ''
  const token = /^Bearer (.+)$/i.exec(header)?.[1] ?? ''
  const digest = (text: string) => createHash('sha256').update(text).digest()
  return timingSafeEqual(digest(token), digest(apiKey))
}

export interface RunningServer {
  url: string
  host: string
  port: number
  /** Stops accepting, gives in-flight requests `graceMs` to finish, fails the rest, closes the listener. */
  close(graceMs: number): Promise<void>
}

const ENDPOINTS: Record<string, (model: ServedModel, body: unknown, limits: Limits) => Endpoint> = {
  '/v1/chat/completions': chatEndpoint,
  '/v1/completions': completionEndpoint,
}

async function readBody(req: IncomingMessage, limit: number): Promise<unknown> {
  const declared = Number(req.headers['content-length'])
  const tooLarge = () =>
    new ApiError(
      413,
      `request body over ${limit} bytes (--max-body-bytes)`,
      'invalid_request_error',
      null,
      'body_too_large',
    )
  if (Number.isFinite(declared) && declared > limit) throw tooLarge()
  let size = 0
  const chunks: Buffer[] = []
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > limit) throw tooLarge()
    chunks.push(chunk as Buffer)
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown
  } catch (error) {
    throw new ApiError(400, `the body is not JSON: ${(error as Error).message}`, 'invalid_request_error')
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return
  const text = JSON.stringify(body)
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), ...headers })
  res.end(text)
}

function sendError(res: ServerResponse, error: ApiError): void {
  sendJson(res, error.status, error.body(), error.headers)
}

function asApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error
  if (error instanceof UnknownModel)
    return new ApiError(404, error.message, 'invalid_request_error', 'model', 'model_not_found')
  return new ApiError(500, `internal error: ${(error as Error).message}`, 'server_error')
}

export async function startServer(
  model: ServedModel,
  scheduler: Scheduler,
  metrics: ServeMetrics,
  options: ServerOptions = {},
): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1'
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  const limits: Limits = { context: scheduler.capacity, rows: scheduler.rows }
  let closing = false

  const generate = async (res: ServerResponse, endpoint: Endpoint): Promise<[number, number]> => {
    const deltas: ChoiceDelta[] = []
    let gone = false
    res.on('close', () => {
      if (!res.writableEnded) gone = true
    })
    const write = (chunk: object) => res.write(`data: ${JSON.stringify(chunk)}\n\n`)
    return new Promise<[number, number]>((resolve) => {
      let completionTokens = () => 0
      const finished = (status: number) => resolve([status, completionTokens()])
      const generation = generationJobs(model, endpoint.prompts, endpoint.params, {
        delta(d) {
          if (gone) return
          if (endpoint.stream) write(endpoint.chunk(d))
          else deltas.push(d)
        },
        done() {
          if (endpoint.stream) {
            if (endpoint.includeUsage) write(endpoint.usageChunk(completionTokens()))
            res.end('data: [DONE]\n\n')
          } else sendJson(res, 200, endpoint.response(deltas, completionTokens()))
          finished(200)
        },
      })
      completionTokens = generation.completionTokens
      scheduler.submit({
        jobs: generation.jobs,
        cancelled: () => gone,
        onFail(error) {
          if (endpoint.stream) {
            write(error.body())
            res.end('data: [DONE]\n\n')
          } else sendError(res, error)
          finished(error.status)
        },
      })
      // admitted to the queue: a stream starts now, so that a client sees its request was taken
      if (endpoint.stream) {
        res.writeHead(200, {
          'Content-Type': 'text/event-stream',
          'Cache-Control': 'no-cache',
          Connection: 'keep-alive',
        })
        res.flushHeaders() // the client sees its request was taken before the first token
        for (const chunk of endpoint.opening()) write(chunk)
      }
      res.on('close', () => {
        if (gone) finished(499)
      })
    })
  }

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<Outcome> => {
    const path = (req.url ?? '/').split('?')[0] as string
    if (req.method === 'GET' && path === '/metrics') {
      const text = await metrics.registry.metrics()
      res.writeHead(200, { 'Content-Type': metrics.registry.contentType })
      res.end(text)
      return { route: '/metrics', status: 200 }
    }
    if (req.method === 'GET' && path === '/health') {
      sendJson(res, closing ? 503 : 200, { status: closing ? 'shutting down' : 'ok' })
      return { route: '/health', status: closing ? 503 : 200 }
    }
    if (options.apiKey !== undefined && path.startsWith('/v1') && !authorized(req, options.apiKey))
      throw new ApiError(
        401,
        'missing or incorrect API key (Authorization: Bearer …)',
        'invalid_request_error',
        null,
        'invalid_api_key',
      )
    if (req.method === 'GET' && (path === '/v1/models' || path.startsWith('/v1/models/'))) {
      const card = {
        id: model.id,
        object: 'model',
        created: model.created,
        owned_by: 'seedflow',
        max_model_len: limits.context,
      }
      if (path === '/v1/models') {
        sendJson(res, 200, { object: 'list', data: [card] })
        return { route: '/v1/models', status: 200 }
      }
      const name = decodeURIComponent(path.slice('/v1/models/'.length))
      if (name !== model.id) throw new UnknownModel(name, model.id)
      sendJson(res, 200, card)
      return { route: '/v1/models', status: 200 }
    }
    const make = ENDPOINTS[path]
    if (!make) throw new ApiError(404, `no route ${req.method} ${path}`, 'invalid_request_error', null, 'not_found')
    if (req.method !== 'POST')
      throw new ApiError(
        405,
        `${path} takes POST, got ${req.method}`,
        'invalid_request_error',
        null,
        'method_not_allowed',
      )
    if (closing)
      throw new ApiError(503, 'the server is shutting down', 'server_error', null, 'shutting_down', {
        'Retry-After': String(RETRY_AFTER_SECONDS),
      })
    const endpoint = make(model, await readBody(req, limit), limits)
    const promptTokens = endpoint.prompts.reduce((sum, p) => sum + p.length, 0)
    const [status, completionTokens] = await generate(res, endpoint)
    return { route: path, status, promptTokens, completionTokens }
  }

  const server = createServer((req, res) => {
    const start = performance.now()
    const path = (req.url ?? '/').split('?')[0] as string
    const log = (outcome: Outcome) =>
      options.accessLog?.({
        method: req.method ?? '?',
        path: loggedPath(req.url),
        status: outcome.status,
        promptTokens: outcome.promptTokens ?? 0,
        completionTokens: outcome.completionTokens ?? 0,
        ms: performance.now() - start,
      })
    if (cors(req, res, options.corsOrigins ?? [])) {
      log({ route: 'other', status: 204 })
      return
    }
    handle(req, res)
      .then((outcome) => {
        metrics.requests.inc({ endpoint: outcome.route, status: String(outcome.status) })
        log(outcome)
      })
      .catch((error: unknown) => {
        const api = asApiError(error)
        if (api.status === 413) res.setHeader('Connection', 'close')
        sendError(res, api)
        metrics.requests.inc({ endpoint: ENDPOINTS[path] ? path : 'other', status: String(api.status) })
        log({ route: path, status: api.status })
        // a body left unread past the limit: close the connection once the error is out
        if (api.status === 413) res.on('finish', () => req.destroy())
      })
  })
  server.keepAliveTimeout = 5000
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const { port } = server.address() as AddressInfo
  const shown = host.includes(':') ? `[${host}]` : host
  return {
    url: `http://${shown}:${port}`,
    host,
    port,
    async close(graceMs: number) {
      closing = true
      const closed = new Promise<void>((resolve) => server.once('close', () => resolve()))
      server.close() // no new connections; open ones end as their requests do
      await scheduler.close(graceMs)
      server.closeIdleConnections()
      const t = setTimeout(() => server.closeAllConnections(), 1000)
      await closed
      clearTimeout(t)
    },
  }
}
