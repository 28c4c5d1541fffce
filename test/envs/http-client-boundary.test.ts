// The environment client at its boundary, against a server that misbehaves on purpose (a plain node:http server
// here, one route per case): wrong types, a huge reply, a reply that is not JSON, one that trickles in, 5xx, 404,
// a refused connection. Each is an EnvHttpError of its kind naming the URL (and the field), within the time limit.
import assert from 'node:assert/strict'
import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { EnvHttpError, HttpEnvClient } from '../../envs/http/index.ts'

type Handler = (res: ServerResponse, hits: number) => void

const json = (res: ServerResponse, body: unknown, status = 200) => {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
}

/** Replies by path; `hits` counts the requests each path got. */
const ROUTES: Record<string, Handler> = {
  '/wrong-types/step': (res) => json(res, { observation: 5, reward: 'x', done: 'no' }),
  '/no-observation/step': (res) => json(res, { reward: 1, done: false }),
  '/bad-info/step': (res) => json(res, { observation: 'o', done: false, info: { valid: 'yes' } }),
  '/bad-id/create': (res) => json(res, { id: -3 }),
  '/huge/observation': (res) => {
    const body = `{"observation": "${'x'.repeat(3 * 2 ** 20)}"}`
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) })
    res.end(body)
  },
  '/huge-chunked/observation': (res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' })
    const chunk = 'x'.repeat(2 ** 16)
    res.write('{"observation": "')
    for (let i = 0; i < 64; i++) res.write(chunk)
    res.end('"}')
  },
  '/html/observation': (res) => {
    res.writeHead(200, { 'content-type': 'text/html' })
    res.end('<html><body>Bad Gateway</body></html>')
  },
  '/trickle/observation': (res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.write('{"observation": "')
    const timer = setInterval(() => res.write('x'), 100)
    res.on('close', () => clearInterval(timer))
  },
  '/flaky/observation': (res, hits) =>
    hits < 2 ? json(res, { error: 'busy' }, 503) : json(res, { observation: 'ok' }),
  '/flaky/step': (res) => json(res, { error: 'boom' }, 500),
  '/gone/step': (res) => json(res, { error: 'no episode with id 3 (evicted)' }, 404),
  '/refuses/step': (res) => json(res, { error: 'step after done' }, 409),
}

describe('http client: replies checked at the boundary', () => {
  let server: Server
  let base: string
  const hits = new Map<string, number>()
  before(async () => {
    server = createServer((req, res) => {
      req.resume()
      const path = (req.url ?? '').split('?')[0] as string
      const n = (hits.get(path) ?? 0) + 1
      hits.set(path, n)
      const route = ROUTES[path]
      route ? route(res, n) : json(res, { error: `no route ${path}` }, 404)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  after(() => {
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
  const client = (prefix: string, options = {}) =>
    new HttpEnvClient(`${base}/${prefix}`, { timeoutMs: 2000, retries: 0, backoffMs: () => 1, ...options })

  /** Rejects with an EnvHttpError of `kind` whose message names the URL and matches `pattern`. */
  async function fails(promise: Promise<unknown>, kind: string, pattern: RegExp, field?: string) {
    await assert.rejects(promise, (error: unknown) => {
      assert.ok(error instanceof EnvHttpError, String(error))
      assert.equal(error.kind, kind, error.message)
      assert.match(error.message, new RegExp(`${base.replace(/[.]/g, '\\.')}/`), 'names the URL')
      assert.match(error.message, pattern)
      if (field) assert.equal(error.field, field)
      return true
    })
  }

  it('a step reply of the wrong types names the field', async () => {
    await fails(
      client('wrong-types').step(0, 'a'),
      'malformed',
      /POST .*\/wrong-types\/step: reply field observation/,
      'observation',
    )
    await fails(client('no-observation').step(0, 'a'), 'malformed', /neither observation nor state/, 'observation')
    await fails(client('bad-info').step(0, 'a'), 'malformed', /reply field info\.valid/, 'info.valid')
    await fails(client('bad-id').create(), 'malformed', /reply field/)
  })

  it('caps the reply: by its declared length, and while it streams in', async () => {
    await fails(client('huge', { maxReplyBytes: 2 ** 20 }).observation(0), 'too-large', /over the cap of 1048576/)
    await fails(client('huge-chunked', { maxReplyBytes: 2 ** 20 }).observation(0), 'too-large', /passed the cap/)
  })

  it('a reply that is not JSON is malformed, with its start quoted', async () => {
    await fails(client('html').observation(0), 'malformed', /not JSON: <html><body>Bad Gateway/, '(body)')
  })

  it('a reply that trickles in times out within the limit', async () => {
    const started = Date.now()
    await fails(client('trickle', { timeoutMs: 600 }).observation(0), 'timeout', /timed out after 600 ms/)
    assert.ok(Date.now() - started < 3000, `took ${Date.now() - started} ms`)
  })

  it('retries an idempotent request after a 5xx, never a step', async () => {
    assert.equal(await client('flaky', { retries: 2 }).observation(0), 'ok')
    assert.equal(hits.get('/flaky/observation'), 2)
    await fails(client('flaky', { retries: 2 }).step(0, 'a'), 'server-error', /HTTP 500/)
    assert.equal(hits.get('/flaky/step'), 1, 'a step is sent once')
  })

  it('tells an episode the server no longer has from a refusal, and neither is retriable', async () => {
    await fails(client('gone', { retries: 2 }).step(3, 'a'), 'not-found', /HTTP 404 .*evicted/)
    await fails(client('refuses', { retries: 2 }).step(3, 'a'), 'rejected', /HTTP 409 .*step after done/)
    assert.equal(hits.get('/gone/step'), 1)
    const error: unknown = await client('gone')
      .step(3, 'a')
      .catch((e: unknown) => e)
    assert.ok(error instanceof EnvHttpError && !error.retriable)
  })

  it('a refused connection is unreachable, retried for any request (nothing reached the server)', async () => {
    const spare = createServer()
    await new Promise<void>((resolve) => spare.listen(0, '127.0.0.1', resolve))
    const port = (spare.address() as AddressInfo).port
    await new Promise<void>((resolve) => spare.close(() => resolve())) // nobody listens there now
    const closed = new HttpEnvClient(`http://127.0.0.1:${port}`, { timeoutMs: 500, retries: 1, backoffMs: () => 1 })
    await assert.rejects(closed.step(0, 'a'), (e: EnvHttpError) => {
      assert.equal(e.kind, 'unreachable')
      assert.match(
        e.message,
        new RegExp(`POST http://127\\.0\\.0\\.1:${port}/step: failed after 2 attempts: .*ECONNREFUSED`),
      )
      return true
    })
  })
})
