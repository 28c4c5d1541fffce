// Serves any environment of ENVS over the AgentGym-style protocol (protocol.ts). Episodes live in memory by id.
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { getEnv } from '../index.ts'
import type { Env, Episode, Split, StepResult } from '../types.ts'
import { SPLITS } from '../types.ts'
import type { StepReply } from './protocol.ts'

export interface ServeOptions {
  port?: number
  host?: string
  /** Largest accepted request body in bytes. */
  maxBodyBytes?: number
}

export interface ServedEnv {
  url: string
  port: number
  close(): Promise<void>
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

function reply(result: StepResult | { observation: string; info: Episode['info'] }, ep: Episode): StepReply {
  const r = result as Partial<StepResult>
  const info: StepReply['info'] = { ...ep.info, valid: r.valid ?? true, action: r.action ?? null }
  if (r.reason !== undefined) info.reason = r.reason
  return { observation: result.observation, state: result.observation, reward: r.reward ?? 0, done: ep.done, info }
}

async function readJson(req: IncomingMessage, limit: number): Promise<Record<string, unknown>> {
  let size = 0
  const chunks: Buffer[] = []
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > limit) throw new HttpError(413, `request body over ${limit} bytes`)
    chunks.push(chunk as Buffer)
  }
  if (size === 0) return {}
  try {
    const value = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('not an object')
    return value as Record<string, unknown>
  } catch (error) {
    throw new HttpError(400, `body is not a JSON object: ${(error as Error).message}`)
  }
}

function taskOf(env: Env, body: Record<string, unknown>) {
  const split = (body.split ?? 'test-seen') as Split
  if (!SPLITS.includes(split)) throw new HttpError(400, `unknown split ${JSON.stringify(split)}`)
  const seed = body.seed ?? body.data_idx ?? 0
  if (typeof seed !== 'number' || !Number.isSafeInteger(seed) || seed < 0) {
    throw new HttpError(400, `seed must be a non-negative integer, got ${JSON.stringify(seed)}`)
  }
  return env.task(split, seed)
}

/** Starts an HTTP server for one environment; resolves once it listens. */
export async function serveEnv(name: string, options: ServeOptions = {}): Promise<ServedEnv> {
  const env = getEnv(name)
  const host = options.host ?? '127.0.0.1'
  const limit = options.maxBodyBytes ?? 4 * 1024 * 1024
  const episodes = new Map<number, Episode>()
  let nextId = 0

  const episodeOf = (raw: unknown): [number, Episode] => {
    const id = Number(raw)
    const ep = episodes.get(id)
    if (!Number.isInteger(id) || !ep) throw new HttpError(404, `no episode with id ${JSON.stringify(raw)}`)
    return [id, ep]
  }

  async function handle(req: IncomingMessage): Promise<unknown> {
    const url = new URL(req.url ?? '/', 'http://localhost')
    const route = `${req.method} ${url.pathname}`
    const query = Object.fromEntries(url.searchParams)
    switch (route) {
      case 'POST /create': {
        const body = await readJson(req, limit)
        const id = nextId++
        episodes.set(id, env.reset(taskOf(env, body)))
        return { id }
      }
      case 'POST /reset': {
        const body = await readJson(req, limit)
        const [id] = episodeOf(body.id)
        const ep = env.reset(taskOf(env, body))
        episodes.set(id, ep)
        return reply({ observation: ep.observation, info: ep.info }, ep)
      }
      case 'POST /step': {
        const body = await readJson(req, limit)
        const [, ep] = episodeOf(body.id)
        if (typeof body.action !== 'string') throw new HttpError(400, 'action must be a string')
        if (ep.done) throw new HttpError(409, `episode ${body.id} has ended after ${ep.stepCount} steps`)
        return reply(ep.step(body.action), ep)
      }
      case 'GET /observation':
        return { observation: episodeOf(query.id)[1].observation }
      case 'GET /available_actions':
        return { available_actions: episodeOf(query.id)[1].admissible() }
      case 'GET /prompt':
        return { prompt: episodeOf(query.id)[1].prompt({ compact: query.compact === 'true' }) }
      case 'GET /trajectory':
        return episodeOf(query.id)[1].trajectory()
      case 'POST /close': {
        const body = await readJson(req, limit)
        const [id] = episodeOf(body.id)
        episodes.delete(id)
        return { closed: true }
      }
      default:
        throw new HttpError(404, `no route ${route}`)
    }
  }

  const server: Server = createServer((req, res) => {
    handle(req).then(
      (body) => {
        res.statusCode = 200
        res.setHeader('content-type', 'application/json')
        res.end(JSON.stringify(body))
      },
      (error: unknown) => {
        res.statusCode = error instanceof HttpError ? error.status : 500
        res.setHeader('content-type', 'application/json')
        res.end(JSON.stringify({ error: error instanceof Error ? error.message : String(error) }))
      },
    )
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, host, () => resolve())
  })
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((e) => (e ? reject(e) : resolve()))
        server.closeAllConnections()
      }),
  }
}
