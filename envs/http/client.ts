// A client for AgentGym-style environment servers (ours or real ones such as AgentGym's ALFWorld and WebShop
// servers), with per-request timeouts and retries. Steps are never retried once a request may have reached the
// server, because a step is not idempotent.
//
// Every reply is checked at the boundary (zod schemas) and every failure is an EnvHttpError of one kind, naming the
// URL (and the field, for a malformed reply): the server unreachable, a timeout (the whole request, a reply that
// trickles in included), a 5xx, a 404 (an episode the server no longer has: evicted, closed, or lost in a restart),
// another refusal, a malformed reply, or one over the size cap. What a caller may do after each is `retriable`.
import { z } from 'zod'
import type { EpisodeInfo, Split, Trajectory } from '../types.ts'

export type EnvFailure =
  | 'unreachable'
  | 'timeout'
  | 'server-error'
  | 'not-found'
  | 'rejected'
  | 'malformed'
  | 'too-large'

export class EnvHttpError extends Error {
  override name = 'EnvHttpError'
  constructor(
    message: string,
    readonly kind: EnvFailure,
    readonly url: string,
    readonly status?: number,
    /** The reply's field that was wrong (`observation`, `info.valid`, `(body)`), for a malformed reply. */
    readonly field?: string,
  ) {
    super(message)
  }

  /** Whether the same request may be sent again: the server did not get it, or it is idempotent and failed there. */
  get retriable(): boolean {
    return this.kind === 'unreachable' || this.kind === 'timeout' || this.kind === 'server-error'
  }
}

export interface HttpEnvClientOptions {
  /** The whole request, the reply's last byte included (default 30 s). */
  timeoutMs?: number
  retries?: number
  /** Wait before retry k (0-based), in milliseconds. */
  backoffMs?: (attempt: number) => number
  /** The largest reply read, in bytes (default 8 MiB); a larger one is a `too-large` failure. */
  maxReplyBytes?: number
  /** Sent as `Authorization: Bearer <key>` (read from the environment by the caller, never stored). */
  apiKey?: string
  /** Requests in flight at once (default unbounded); the others wait their turn, outside their time limit. */
  concurrency?: number
}

/** What a step returns, normalized across servers (AgentGym's `state` or our `observation`). */
export interface RemoteStep {
  observation: string
  reward: number
  done: boolean
  info: Partial<EpisodeInfo> & { valid?: boolean; reason?: string; action?: string | null }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const EPISODE_ID = z.number().int().nonnegative()
const CREATE_REPLY = z.union([EPISODE_ID, z.object({ id: EPISODE_ID })])
const STEP_REPLY = z
  .object({
    observation: z.string().optional(),
    state: z.string().optional(),
    reward: z.number().finite().optional(),
    done: z.boolean(),
    info: z
      .object({
        won: z.boolean().optional(),
        score: z.number().finite().optional(),
        family: z.string().optional(),
        valid: z.boolean().optional(),
        reason: z.string().optional(),
        action: z.string().nullable().optional(),
      })
      .loose()
      .optional(),
  })
  .refine((r) => r.observation !== undefined || r.state !== undefined, {
    message: 'neither observation nor state is a string',
    path: ['observation'],
  })
const OBSERVATION_REPLY = z.union([z.string(), z.object({ observation: z.string() })])
const ACTIONS_REPLY = z.union([z.array(z.string()), z.object({ available_actions: z.array(z.string()).nullable() })])
const PROMPT_REPLY = z.object({ prompt: z.string() })
const TRAJECTORY_REPLY = z
  .object({ env: z.string(), steps: z.array(z.unknown()), finalObservation: z.string(), totalReward: z.number() })
  .loose()
const EXPERT_REPLY = z.object({ action: z.string(), thought: z.string().optional() })
const ORACLE_REPLY = z.object({
  episode_summary: z.string(),
  episode_skill: z.string(),
  entities: z.array(z.string()).optional(),
  rule: z.string().optional(),
})
const INFO_REPLY = z
  .object({ name: z.string().optional(), version: z.string().optional(), routes: z.array(z.string()).optional() })
  .loose()

/** What a server says of itself (`GET /info`, optional): its name and version, and the optional routes it has. */
export interface ServerInfo {
  name?: string
  version?: string
  /** The optional routes it answers (`prompt`, `trajectory`, `expert_action`, `oracle`); none for a server without /info. */
  routes: string[]
}
const CLOSE_REPLY = z.unknown()

/** Why a fetch failed before any reply: a refused or dropped connection, or the time limit. */
function failureOf(error: unknown): { kind: EnvFailure; why: string } {
  const e = error as { name?: string; cause?: { code?: string; name?: string } }
  if (e.name === 'TimeoutError' || e.cause?.name === 'TimeoutError') return { kind: 'timeout', why: 'timed out' }
  const cause = e.cause as { code?: string; message?: string } | undefined
  return { kind: 'unreachable', why: cause?.code ?? cause?.message ?? String(error) }
}

export class HttpEnvClient {
  private readonly timeoutMs: number
  private readonly retries: number
  private readonly backoff: (attempt: number) => number
  private readonly maxReplyBytes: number
  private readonly apiKey: string | undefined
  private readonly slots: Slots

  constructor(
    readonly baseUrl: string,
    options: HttpEnvClientOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 30_000
    this.retries = options.retries ?? 3
    this.backoff = options.backoffMs ?? ((k) => 200 * 2 ** k)
    this.maxReplyBytes = options.maxReplyBytes ?? 8 * 2 ** 20
    this.apiKey = options.apiKey
    this.slots = new Slots(options.concurrency ?? Number.POSITIVE_INFINITY)
  }

  /** One request and its checked reply; idempotent requests are retried on the failures that allow it. */
  private async request<T>(
    method: 'GET' | 'POST',
    path: string,
    body: unknown,
    idempotent: boolean,
    schema: z.ZodType<T>,
  ): Promise<T> {
    const url = `${this.baseUrl.replace(/\/$/, '')}${path}`
    let last: EnvHttpError | undefined
    for (let attempt = 0; attempt <= this.retries; attempt++) {
      if (attempt > 0) await sleep(this.backoff(attempt - 1))
      try {
        return await this.slots.run(() => this.once(method, url, body, schema))
      } catch (error) {
        if (!(error instanceof EnvHttpError)) throw error
        last = error
        // a step may have reached the server unless the connection was refused outright
        const resend = idempotent ? error.retriable : error.kind === 'unreachable' && /ECONNREFUSED/.test(error.message)
        if (!resend) {
          if (!idempotent && error.retriable) error.message += ' (not retried: the request may have been applied)'
          throw error
        }
      }
    }
    const error = last as EnvHttpError
    throw new EnvHttpError(
      `${method} ${url}: failed after ${this.retries + 1} attempts: ${error.message}`,
      error.kind,
      url,
      error.status,
    )
  }

  private async once<T>(method: 'GET' | 'POST', url: string, body: unknown, schema: z.ZodType<T>): Promise<T> {
    const what = `${method} ${url}`
    const headers: Record<string, string> = {}
    if (body !== undefined) headers['content-type'] = 'application/json'
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`
    let text: string
    let status: number
    try {
      const res = await fetch(url, {
        method,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.timeoutMs),
      })
      status = res.status
      text = await readCapped(res, this.maxReplyBytes, what)
    } catch (error) {
      if (error instanceof EnvHttpError) throw error
      const { kind, why } = failureOf(error)
      const limit = kind === 'timeout' ? ` after ${this.timeoutMs} ms` : ''
      throw new EnvHttpError(`${what}: ${why}${limit}`, kind, url)
    }
    if (status >= 500)
      throw new EnvHttpError(`${what}: HTTP ${status} ${text.slice(0, 200)}`, 'server-error', url, status)
    if (status === 404) throw new EnvHttpError(`${what}: HTTP 404 ${text.slice(0, 200)}`, 'not-found', url, status)
    if (status < 200 || status >= 300)
      throw new EnvHttpError(`${what}: HTTP ${status} ${text.slice(0, 200)}`, 'rejected', url, status)
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch {
      throw new EnvHttpError(
        `${what}: the reply is not JSON: ${text.slice(0, 200)}`,
        'malformed',
        url,
        status,
        '(body)',
      )
    }
    const parsed = schema.safeParse(json)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      const field = issue?.path.length ? issue.path.join('.') : '(body)'
      throw new EnvHttpError(`${what}: reply field ${field}: ${issue?.message}`, 'malformed', url, status, field)
    }
    return parsed.data
  }

  async create(task: { split?: Split; seed?: number } = {}): Promise<number> {
    const r = await this.request('POST', '/create', task, false, CREATE_REPLY)
    return typeof r === 'number' ? r : r.id
  }

  async reset(id: number, task: { split?: Split; seed?: number } = {}): Promise<RemoteStep> {
    return normalize(await this.request('POST', '/reset', { id, ...task, data_idx: task.seed }, true, STEP_REPLY))
  }

  async step(id: number, action: string): Promise<RemoteStep> {
    return normalize(await this.request('POST', '/step', { id, action }, false, STEP_REPLY))
  }

  async observation(id: number): Promise<string> {
    const r = await this.request('GET', `/observation?id=${id}`, undefined, true, OBSERVATION_REPLY)
    return typeof r === 'string' ? r : r.observation
  }

  async availableActions(id: number): Promise<string[] | null> {
    const r = await this.request('GET', `/available_actions?id=${id}`, undefined, true, ACTIONS_REPLY)
    return Array.isArray(r) ? r : r.available_actions
  }

  async prompt(id: number, compact = false): Promise<string> {
    return (await this.request('GET', `/prompt?id=${id}&compact=${compact}`, undefined, true, PROMPT_REPLY)).prompt
  }

  async trajectory(id: number): Promise<Trajectory> {
    return (await this.request(
      'GET',
      `/trajectory?id=${id}`,
      undefined,
      true,
      TRAJECTORY_REPLY,
    )) as unknown as Trajectory
  }

  /**
   * The expert's next action and its sub-goal in a few words ('' where the server gives none): the optional route
   * /expert_action (a server without it answers 404 `no route`).
   */
  async expert(id: number): Promise<{ action: string; thought: string }> {
    const r = await this.request('GET', `/expert_action?id=${id}`, undefined, true, EXPERT_REPLY)
    return { action: r.action, thought: r.thought ?? '' }
  }

  /** The server's hindsight skill for a finished trajectory (the optional route `POST /oracle`). */
  async oracle(trajectory: Trajectory): Promise<z.infer<typeof ORACLE_REPLY>> {
    return this.request('POST', '/oracle', { trajectory }, true, ORACLE_REPLY)
  }

  /** What the server says of itself (`GET /info`); a server without the route has no optional routes. */
  async info(): Promise<ServerInfo> {
    try {
      const r = await this.request('GET', '/info', undefined, true, INFO_REPLY)
      return {
        ...(r.name === undefined ? {} : { name: r.name }),
        ...(r.version === undefined ? {} : { version: r.version }),
        routes: r.routes ?? [],
      }
    } catch (error) {
      if (error instanceof EnvHttpError && (error.kind === 'not-found' || error.status === 405)) return { routes: [] }
      throw error
    }
  }

  async close(id: number): Promise<void> {
    await this.request('POST', '/close', { id }, true, CLOSE_REPLY)
  }
}

/** At most `limit` tasks running at once, the rest started in the order they came. */
class Slots {
  private running = 0
  private readonly waiting: Array<() => void> = []

  constructor(private readonly limit: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve))
    else this.running++
    try {
      return await task()
    } finally {
      const next = this.waiting.shift()
      if (next) next()
      else this.running--
    }
  }
}

/** The reply's text, read up to `cap` bytes: past it the request is cut and the reply refused. */
async function readCapped(res: Response, cap: number, what: string): Promise<string> {
  const declared = Number(res.headers.get('content-length') ?? Number.NaN)
  if (declared > cap) {
    await res.body?.cancel()
    throw new EnvHttpError(`${what}: the reply is ${declared} bytes, over the cap of ${cap}`, 'too-large', res.url)
  }
  if (!res.body) return ''
  const reader = res.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > cap) {
      await reader.cancel()
      throw new EnvHttpError(`${what}: the reply passed the cap of ${cap} bytes`, 'too-large', res.url)
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks).toString('utf8')
}

function normalize(r: z.infer<typeof STEP_REPLY>): RemoteStep {
  const { info } = r
  return {
    observation: r.observation ?? r.state ?? '',
    reward: r.reward ?? 0,
    done: r.done,
    info: {
      ...(info?.won === undefined ? {} : { won: info.won }),
      ...(info?.score === undefined ? {} : { score: info.score }),
      ...(info?.family === undefined ? {} : { family: info.family }),
      ...(info?.valid === undefined ? {} : { valid: info.valid }),
      ...(info?.reason === undefined ? {} : { reason: info.reason }),
      ...(info?.action === undefined ? {} : { action: info.action }),
    },
  }
}
