// A client for AgentGym-style environment servers (ours or real ones such as AgentGym's ALFWorld and WebShop
// servers), with per-request timeouts and retries. Steps are never retried once a request may have reached the
// server, because a step is not idempotent.
import type { EpisodeInfo, Split, Trajectory } from '../types.ts'
import type { StepReply } from './protocol.ts'

export class EnvHttpError extends Error {
  override name = 'EnvHttpError'
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message)
  }
}

export interface HttpEnvClientOptions {
  timeoutMs?: number
  retries?: number
  /** Wait before retry k (0-based), in milliseconds. */
  backoffMs?: (attempt: number) => number
}

/** What a step returns, normalized across servers (AgentGym's `state` or our `observation`). */
export interface RemoteStep {
  observation: string
  reward: number
  done: boolean
  info: Partial<EpisodeInfo> & { valid?: boolean; reason?: string; action?: string | null }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export class HttpEnvClient {
  private readonly timeoutMs: number
  private readonly retries: number
  private readonly backoff: (attempt: number) => number

  constructor(
    readonly baseUrl: string,
    options: HttpEnvClientOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 30_000
    this.retries = options.retries ?? 3
    this.backoff = options.backoffMs ?? ((k) => 200 * 2 ** k)
  }

  private async request(method: 'GET' | 'POST', path: string, body: unknown, idempotent: boolean): Promise<unknown> {
    const url = `${this.baseUrl.replace(/\/$/, '')}${path}`
    let lastError: unknown
    for (let attempt = 0; attempt <= this.retries; attempt++) {
      if (attempt > 0) await sleep(this.backoff(attempt - 1))
      let res: Response
      try {
        res = await fetch(url, {
          method,
          headers: body === undefined ? {} : { 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(this.timeoutMs),
        })
      } catch (error) {
        lastError = error
        const refused = (error as { cause?: { code?: string } }).cause?.code === 'ECONNREFUSED'
        if (idempotent || refused) continue
        throw new EnvHttpError(`${method} ${url}: ${String(error)} (not retried: the request may have been applied)`)
      }
      const text = await res.text()
      if (res.status >= 500 && idempotent) {
        lastError = new EnvHttpError(`${method} ${url}: HTTP ${res.status} ${text.slice(0, 200)}`, res.status)
        continue
      }
      if (!res.ok) throw new EnvHttpError(`${method} ${url}: HTTP ${res.status} ${text.slice(0, 200)}`, res.status)
      try {
        return JSON.parse(text) as unknown
      } catch {
        throw new EnvHttpError(`${method} ${url}: response is not JSON: ${text.slice(0, 200)}`)
      }
    }
    throw new EnvHttpError(`${method} ${url}: failed after ${this.retries + 1} attempts: ${String(lastError)}`)
  }

  async create(task: { split?: Split; seed?: number } = {}): Promise<number> {
    const r = (await this.request('POST', '/create', task, false)) as number | { id: number }
    return typeof r === 'number' ? r : r.id
  }

  async reset(id: number, task: { split?: Split; seed?: number } = {}): Promise<RemoteStep> {
    return normalize(await this.request('POST', '/reset', { id, ...task, data_idx: task.seed }, true))
  }

  async step(id: number, action: string): Promise<RemoteStep> {
    return normalize(await this.request('POST', '/step', { id, action }, false))
  }

  async observation(id: number): Promise<string> {
    const r = (await this.request('GET', `/observation?id=${id}`, undefined, true)) as { observation?: string } | string
    return typeof r === 'string' ? r : (r.observation ?? '')
  }

  async availableActions(id: number): Promise<string[] | null> {
    const r = (await this.request('GET', `/available_actions?id=${id}`, undefined, true)) as
      | { available_actions?: string[] | null }
      | string[]
    return Array.isArray(r) ? r : (r.available_actions ?? null)
  }

  async prompt(id: number, compact = false): Promise<string> {
    return ((await this.request('GET', `/prompt?id=${id}&compact=${compact}`, undefined, true)) as { prompt: string })
      .prompt
  }

  async trajectory(id: number): Promise<Trajectory> {
    return (await this.request('GET', `/trajectory?id=${id}`, undefined, true)) as Trajectory
  }

  async close(id: number): Promise<void> {
    await this.request('POST', '/close', { id }, true)
  }
}

function normalize(raw: unknown): RemoteStep {
  const r = raw as Partial<StepReply> & { state?: string }
  if (typeof r !== 'object' || r === null) throw new EnvHttpError(`step reply is not an object: ${JSON.stringify(raw)}`)
  return {
    observation: r.observation ?? r.state ?? '',
    reward: typeof r.reward === 'number' ? r.reward : 0,
    done: r.done === true,
    info: r.info ?? {},
  }
}
