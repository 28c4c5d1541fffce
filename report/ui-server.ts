// `seedflow ui`'s web server: the report pages of every run in the store, made on request from the stored
// artifacts, so a running run's page shows what it wrote last (and reloads itself while the run is not
// finished). Routes: `/` lists the runs, `/runs/<id>/` is a run's report, `/runs/<id>/iterations/<k>` an
// iteration's skill page, `/compare?run=a&run=b` several runs side by side (each once, at most MAX_COMPARED_RUNS).
// Listens on 127.0.0.1 by default. A request it cannot route (a target that is no URL, a malformed
// percent-escape, too many runs) is answered 400, and no request can take the server down.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { UnknownRunError } from '../records/audit.ts'
import type { RunRecord } from '../records/record-run.ts'
import { envLabelOf } from '../seed/config.ts'
import { type ArtifactStore, listAll } from '../store/artifact-store.ts'
import { getJson } from '../store/json.ts'
import { InvalidRunIdError, keys, RUN_ID_PATTERN } from '../store/keys.ts'
import { DamageLog } from './damage.ts'
import { html, page } from './html.ts'
import { readRunData } from './run-data.ts'
import { runPage } from './run-page.ts'
import { NotInspectableError, readIterationSkills } from './skill-data.ts'
import { skillPage } from './skill-page.ts'

export interface UiOptions {
  store: ArtifactStore
  host: string
  port: number
  trajectories: number
  /** Seconds between reloads of a page whose run is not finished. */
  refreshSeconds: number
  /** Temporal's state and Web UI link of runs, asked per page (best effort). */
  temporal?: (
    runIds: readonly string[],
  ) => Promise<{ status: ReadonlyMap<string, string>; link?: (runId: string) => string }>
  log?: (line: string) => void
}

const CLOSED = new Set(['COMPLETED', 'FAILED', 'TERMINATED', 'CANCELED', 'TIMED_OUT', 'CONTINUED_AS_NEW'])

/** More runs side by side than the page has colours for (vega's category scale has ten). */
export const MAX_COMPARED_RUNS = 10

class NotFound extends Error {
  override name = 'NotFound'
}

/** A request this server cannot even route: answered 400. */
class BadRequest extends Error {
  override name = 'BadRequest'
}

/**
 * The request target as a URL: origin-form (`/runs/x/?a=b`, `//` included: a path of empty segments) or
 * absolute-form (`http://host/path`); anything else, or an absolute URL that does not parse, is a BadRequest.
 */
export function requestUrl(target: string | undefined): URL {
  const raw = target ?? '/'
  try {
    if (raw.startsWith('/')) return new URL(`http://localhost${raw}`)
    const url = new URL(raw)
    if (url.protocol === 'http:' || url.protocol === 'https:') return url
  } catch {
    // not a URL at all: the BadRequest below
  }
  throw new BadRequest(`not a request target this server reads: ${JSON.stringify(raw.slice(0, 200))}`)
}

/** The path's segments, percent-decoded; BadRequest for a malformed escape (`%zz`, half a UTF-8 sequence). */
function segments(pathname: string): string[] {
  return pathname
    .split('/')
    .filter(Boolean)
    .map((segment) => {
      try {
        return decodeURIComponent(segment)
      } catch {
        throw new BadRequest(`malformed percent-escape in the path segment ${JSON.stringify(segment.slice(0, 200))}`)
      }
    })
}

/** Run ids in the store: every `runs/<id>/run.json`. */
async function runIds(store: ArtifactStore): Promise<string[]> {
  const ids: string[] = []
  for await (const { key } of listAll(store, 'runs/')) {
    const m = /^runs\/([^/]+)\/run\.json$/.exec(key)
    if (m) ids.push(m[1] as string)
  }
  return ids.sort()
}

async function indexPage(options: UiOptions): Promise<string> {
  const ids = await runIds(options.store)
  const rows = []
  for (const id of ids) {
    const damage = new DamageLog()
    const r = await damage.read(
      keys.runRecord(id),
      async () => (await getJson(options.store, keys.runRecord(id))) as RunRecord,
    )
    const cells = r
      ? html`<td>${String(r.config.algorithm ?? '')}</td><td>${envLabelOf(r.config.env)}</td><td>${r.createdAt}</td>`
      : html`<td colspan="3" class="status-bad">run.json cannot be read: ${damage.items[0]?.reason}</td>`
    rows.push(html`<tr><td><input type="checkbox" name="run" value="${id}"></td><td><a href="/runs/${encodeURIComponent(id)}/">${id}</a></td>
${cells}</tr>`)
  }
  const body = html`<header class="top"><h1>seedflow runs</h1><div class="muted">${options.store.location}</div></header>
<main><form action="/compare" method="get">
<table><tr><th></th><th>run</th><th>algorithm</th><th>env</th><th>created</th></tr>${rows}</table>
<button type="submit">compare the checked runs</button></form>
${ids.length === 0 ? html`<p class="muted">No runs in this store yet.</p>` : ''}</main>`
  return page({ title: 'seedflow runs', body })
}

async function reportPage(options: UiOptions, ids: string[]): Promise<string> {
  // Temporal first: a run it calls closed has written everything before the store is read
  const temporal = await options.temporal?.(ids).catch(() => undefined)
  const runs = []
  for (const id of ids) runs.push(await readRunData(options.store, id))
  const running = runs.some((r) => {
    const s = temporal?.status.get(r.runId)
    return s ? !CLOSED.has(s) : !r.progress.finished
  })
  return runPage(runs, {
    links: {
      skills: (runId, k) => `/runs/${encodeURIComponent(runId)}/iterations/${k}`,
      ...(temporal?.link ? { temporal: temporal.link } : {}),
    },
    ...(temporal ? { workflowStatus: temporal.status } : {}),
    ...(running ? { refreshSeconds: options.refreshSeconds } : {}),
  })
}

async function route(options: UiOptions, url: URL): Promise<string> {
  const parts = segments(url.pathname)
  const runId = (id: string | undefined) => {
    if (!id || !RUN_ID_PATTERN.test(id)) throw new NotFound(`not a run id: ${id ?? '(none)'}`)
    return id
  }
  if (parts.length === 0) return indexPage(options)
  if (parts[0] === 'compare' && parts.length === 1) {
    const ids = [...new Set(url.searchParams.getAll('run'))].map(runId)
    if (ids.length === 0) throw new NotFound('check at least one run to compare')
    if (ids.length > MAX_COMPARED_RUNS)
      throw new BadRequest(`compare at most ${MAX_COMPARED_RUNS} runs side by side, not ${ids.length}`)
    return reportPage(options, ids)
  }
  if (parts[0] === 'runs' && parts.length === 2) return reportPage(options, [runId(parts[1])])
  if (parts[0] === 'runs' && parts.length === 4 && parts[2] === 'iterations' && /^\d{1,4}$/.test(parts[3] as string)) {
    const id = runId(parts[1])
    const data = await readIterationSkills(options.store, id, Number(parts[3]), { limit: options.trajectories })
    return skillPage(data, { report: `/runs/${encodeURIComponent(id)}/` })
  }
  throw new NotFound(`no page at ${url.pathname}`)
}

const HEADINGS: Record<number, string> = { 400: 'Bad request', 404: 'Not found' }

function errorPage(status: number, message: string): string {
  return page({
    title: `seedflow: ${status}`,
    body: html`<header class="top"><h1>${HEADINGS[status] ?? 'Error'}</h1><nav><a href="/">all runs</a></nav></header>
<main><p>${message}</p></main>`,
  })
}

function statusOf(error: unknown): number {
  if (error instanceof BadRequest) return 400
  const notFound =
    error instanceof NotFound ||
    error instanceof UnknownRunError ||
    error instanceof NotInspectableError ||
    error instanceof InvalidRunIdError
  return notFound ? 404 : 500
}

export async function startUiServer(
  options: UiOptions,
): Promise<{ server: Server; url: string; close(): Promise<void> }> {
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end()
      return
    }
    let status = 200
    let body: string
    try {
      body = await route(options, requestUrl(req.url))
    } catch (error) {
      status = statusOf(error)
      body = errorPage(status, (error as Error).message)
      if (status === 500) options.log?.(`${req.method} ${req.url}: ${(error as Error).stack ?? error}`)
    }
    res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' })
    res.end(req.method === 'HEAD' ? undefined : body)
  }
  // whatever goes wrong with one request (a client that hung up mid-answer) ends that request, never the server
  const server = createServer((req, res) =>
    handle(req, res).catch((error: unknown) => {
      options.log?.(`${req.method} ${req.url}: ${(error as Error).stack ?? error}`)
      if (res.headersSent) res.destroy()
      else res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('internal error\n')
    }),
  )
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port, options.host, () => resolve())
  })
  const { port } = server.address() as AddressInfo
  const url = `http://${options.host.includes(':') ? `[${options.host}]` : options.host}:${port}/`
  return {
    server,
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections() // a browser's keep-alive connection would hold close() open
      }),
  }
}
