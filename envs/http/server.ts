// Serves any environment of ENVS over the AgentGym-style protocol (protocol.ts). Episodes live in memory by id,
// at most `maxEpisodes` at once; an episode no request has touched for `idleTtlMs` is evicted (checked lazily at
// each request: the map is kept in order of last use, so a sweep only looks at the episodes it evicts).
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { z } from 'zod'
import { getEnv } from '../index.ts'
import type { Env, Episode, Split, StepResult, Trajectory } from '../types.ts'
import { SPLITS } from '../types.ts'
import type { StepReply } from './protocol.ts'
import { OPTIONAL_ROUTES, type OptionalRoute } from './remote-env.ts'

export interface ServeOptions {
  port?: number
  host?: string
  /** Largest accepted request body in bytes. */
  maxBodyBytes?: number
  /** Most episodes open at once (default 1,024); /create beyond it answers 429. */
  maxEpisodes?: number
  /** An episode no request touched for this long is evicted (default 30 minutes). */
  idleTtlMs?: number
  /** The clock, in milliseconds (tests); default Date.now. */
  now?: () => number
  /** The version `GET /info` reports (the CLI gives seedflow's). */
  version?: string
  /**
   * Take a step's text that the environment cannot parse but that is an action once written in its format (`up`
   * for sokoban's `<think></think><action>up</action>`) as that action: AgentGym's clients send the action they
   * parsed, not the model's output. Off by default: a run's policy must write the format itself.
   */
  bareActions?: boolean
  /** The optional routes served (default all): a server like one without them, for tests and for trying a run. */
  routes?: readonly OptionalRoute[]
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
  }
}

export const DEFAULT_MAX_EPISODES = 1024
export const DEFAULT_IDLE_TTL_MS = 30 * 60_000

/** 30 min, 90 s, 1.5 h: a duration as an operator reads it. */
export function formatDuration(ms: number): string {
  const round = (x: number) => String(Number(x.toFixed(1)))
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`
  if (ms % 60_000 === 0) return `${ms / 60_000} min`
  if (ms >= 1000) return `${round(ms / 1000)} s`
  return `${round(ms)} ms`
}

const ID_PATTERN = /^(0|[1-9][0-9]*)$/
const POST_ROUTES = new Set(['/create', '/reset', '/step', '/close', '/oracle'])

/**
 * An episode id as the protocol writes it: in a body, a JSON number whose value is a non-negative safe integer;
 * in a query string, a plain decimal integer (/^(0|[1-9][0-9]*)$/). Everything else is a 400, never coerced:
 * `[0]`, `"0"`, `true`, `null`, `-1`, `1.5`, 2^53 in a body; `0x0`, `1e0`, `00`, `+1`, `-1`, `1.5`, `` in a query.
 * (JSON itself reads 1, 1.0 and 1e0 as the same number, so in a body they are the same id.)
 */
function parseEpisodeId(raw: unknown, where: 'body' | 'query'): number {
  const id = where === 'query' ? (typeof raw === 'string' && ID_PATTERN.test(raw) ? Number(raw) : Number.NaN) : raw
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) {
    const form =
      where === 'query'
        ? '?id= must be a non-negative integer in plain decimal'
        : 'id must be a non-negative integer written as a JSON number'
    const got = raw === undefined ? 'nothing' : JSON.stringify(raw)
    throw new HttpError(400, `${form} (0, 1, 2, …: the id /create answered), got ${got}`)
  }
  return id
}

export interface ServedEnv {
  url: string
  port: number
  close(): Promise<void>
}

function reply(result: StepResult | { observation: string; info: Episode['info'] }, ep: Episode): StepReply {
  const r = result as Partial<StepResult>
  const info: StepReply['info'] = { ...ep.info, valid: r.valid ?? true, action: r.action ?? null }
  if (r.reason !== undefined) info.reason = r.reason
  return {
    observation: result.observation,
    state: result.observation,
    reward: r.reward ?? 0,
    done: ep.done,
    info,
    // what AgentGym's clients read beside (BabyAI's and SciWorld's score, ALFWorld's admissible actions)
    score: ep.info.score,
    available_actions: ep.admissible(),
  }
}

/** A bare action (AgentGym's clients send the action they parsed), written in the environment's format. */
function asResponse(env: Env, text: string): string {
  if (env.parse(text).ok) return text
  const wrapped = env.formatResponse(text.trim())
  return env.parse(wrapped).ok ? wrapped : text
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
  // AgentGym's clients send the task's index as data_idx (most) or game (Maze, ALFWorld)
  const seed = body.seed ?? body.data_idx ?? body.game ?? 0
  if (typeof seed !== 'number' || !Number.isSafeInteger(seed) || seed < 0) {
    throw new HttpError(400, `seed must be a non-negative integer, got ${JSON.stringify(seed)}`)
  }
  return env.task(split, seed)
}

/** What the oracles read of a trajectory (as /trajectory gives it); the rest is passed through. */
const ORACLE_TRAJECTORY = z.looseObject({
  taskText: z.string(),
  finalObservation: z.string(),
  task: z.looseObject({}),
  steps: z.array(z.looseObject({ observation: z.string(), response: z.string() })),
  info: z.looseObject({ won: z.boolean() }),
})

/** A trajectory as /trajectory gave it, checked for what the oracles read. */
function trajectoryOf(raw: unknown): Trajectory {
  if (!ORACLE_TRAJECTORY.safeParse(raw).success)
    throw new HttpError(400, 'trajectory must be a trajectory as GET /trajectory answers it')
  return raw as Trajectory
}

/** Starts an HTTP server for one environment; resolves once it listens. */
export async function serveEnv(name: string, options: ServeOptions = {}): Promise<ServedEnv> {
  const env = getEnv(name)
  const host = options.host ?? '127.0.0.1'
  const limit = options.maxBodyBytes ?? 4 * 1024 * 1024
  const maxEpisodes = options.maxEpisodes ?? DEFAULT_MAX_EPISODES
  const ttl = options.idleTtlMs ?? DEFAULT_IDLE_TTL_MS
  const now = options.now ?? Date.now
  if (!Number.isSafeInteger(maxEpisodes) || maxEpisodes < 1)
    throw new RangeError(`maxEpisodes must be a positive integer, got ${maxEpisodes}`)
  if (!Number.isFinite(ttl) || ttl <= 0)
    throw new RangeError(`idleTtlMs must be a positive number of milliseconds, got ${ttl}`)
  const idle = formatDuration(ttl)
  const served = new Set<string>(options.routes ?? OPTIONAL_ROUTES)
  /** Open episodes in order of last use, oldest first. */
  const episodes = new Map<number, { episode: Episode; usedAt: number }>()
  /** Ids evicted for idleness, so that their 404 says so; bounded, oldest forgotten first. */
  const evicted = new Set<number>()
  const EVICTED_REMEMBERED = 4 * maxEpisodes
  let nextId = 0

  /** Evicts every episode idle for the TTL or longer. */
  const sweep = (t: number) => {
    for (const [id, e] of episodes) {
      if (t - e.usedAt < ttl) return
      episodes.delete(id)
      evicted.add(id)
      if (evicted.size > EVICTED_REMEMBERED) evicted.delete(evicted.values().next().value as number)
    }
  }

  const open = (id: number, episode: Episode) => {
    episodes.delete(id) // to the end: the most recently used
    episodes.set(id, { episode, usedAt: now() })
  }

  const episodeOf = (raw: unknown, where: 'body' | 'query'): [number, Episode] => {
    const id = parseEpisodeId(raw, where)
    const e = episodes.get(id)
    if (!e) {
      throw new HttpError(
        404,
        evicted.has(id)
          ? `no episode with id ${id}: it was evicted after ${idle} idle; create a new one`
          : `no episode with id ${id}: unknown, or closed (idle episodes are evicted after ${idle})`,
      )
    }
    open(id, e.episode)
    return [id, e.episode]
  }

  async function handle(req: IncomingMessage): Promise<unknown> {
    const url = new URL(req.url ?? '/', 'http://localhost')
    const route = `${req.method} ${url.pathname}`
    if (!served.has(url.pathname.slice(1)) && (OPTIONAL_ROUTES as readonly string[]).includes(url.pathname.slice(1)))
      throw new HttpError(404, `no route ${route}`)
    const query = Object.fromEntries(url.searchParams)
    const body = req.method === 'POST' && POST_ROUTES.has(url.pathname) ? await readJson(req, limit) : {}
    // from here on the handler runs without a pause: the sweep, the cap check and the insertion see one state,
    // however many requests are in flight
    const t = now()
    sweep(t)
    const queryId = () => {
      const ids = url.searchParams.getAll('id')
      if (ids.length > 1) throw new HttpError(400, `?id= given ${ids.length} times; give one episode id`)
      return episodeOf(ids[0], 'query')[1]
    }
    switch (route) {
      case 'POST /create': {
        const task = taskOf(env, body)
        if (episodes.size >= maxEpisodes) {
          const [oldest] = episodes.values()
          const retryAfter = oldest ? Math.max(1, Math.ceil((oldest.usedAt + ttl - t) / 1000)) : 1
          throw new HttpError(
            429,
            `${episodes.size} episodes open, the cap; finished episodes are closed with /close or evicted after ${idle} idle`,
            { 'retry-after': String(retryAfter) },
          )
        }
        const id = nextId++
        const ep = env.reset(task)
        open(id, ep)
        // the episode starts reset to its task: its first observation too (AgentGym's TextCraft client reads it)
        return { id, observation: ep.observation }
      }
      case 'POST /reset': {
        const [id, current] = episodeOf(body.id, 'body')
        // without a task, the one /create was given
        const named = ['split', 'seed', 'data_idx', 'game'].some((field) => body[field] !== undefined)
        const ep = env.reset(named ? taskOf(env, body) : current.task)
        open(id, ep)
        return { ...reply({ observation: ep.observation, info: ep.info }, ep), task_description: ep.taskText }
      }
      case 'POST /step': {
        const [id, ep] = episodeOf(body.id, 'body')
        if (typeof body.action !== 'string') throw new HttpError(400, 'action must be a string')
        if (ep.done) throw new HttpError(409, `episode ${id} has ended after ${ep.stepCount} steps`)
        return reply(ep.step(options.bareActions ? asResponse(env, body.action) : body.action), ep)
      }
      case 'GET /observation':
        return { observation: queryId().observation }
      case 'GET /available_actions':
        return { available_actions: queryId().admissible() }
      case 'GET /prompt':
        return { prompt: queryId().prompt({ compact: query.compact === 'true' }) }
      case 'GET /trajectory':
        return queryId().trajectory()
      case 'GET /expert_action': {
        const ep = queryId()
        return { action: ep.expertAction(), thought: ep.expertThought() }
      }
      case 'POST /oracle': {
        const a = env.oracle(trajectoryOf(body.trajectory))
        return { ...a.output, entities: a.entities, ...(a.rule ? { rule: a.rule } : {}) }
      }
      case 'GET /info':
        return {
          name: env.name,
          ...(options.version ? { version: options.version } : {}),
          routes: [...served],
        }
      case 'POST /close': {
        const [id] = episodeOf(body.id, 'body')
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
        for (const [name, value] of Object.entries(error instanceof HttpError ? error.headers : {}))
          res.setHeader(name, value)
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
