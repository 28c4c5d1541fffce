// `seedflow ui` under malformed requests (issue 40 item 11): request targets sent raw over a loopback socket (fetch
// would normalize them), seeded so a failure reproduces (SEEDFLOW_UI_FUZZ_SEED picks another stream). The server
// never dies, never answers 5xx, and still serves a good request afterwards; the issue's reproductions answer
// 400, and /compare takes each run once, at most MAX_COMPARED_RUNS of them.
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { mulberry32, pick, type Rng, randInt } from '../../envs/rng.ts'
import type { RunRecord } from '../../records/record-run.ts'
import { MAX_COMPARED_RUNS, startUiServer } from '../../report/ui-server.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { putJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'

const RUN = 'fuzz-run'
const SEED = Number(process.env.SEEDFLOW_UI_FUZZ_SEED ?? 4011)
const REQUESTS = 1500

const BASES = [
  '/',
  '//',
  '/runs/',
  `/runs/${RUN}/`,
  `/runs/${RUN}/iterations/0`,
  '/compare',
  `/compare?run=${RUN}`,
  '/elsewhere',
  'http://127.0.0.1/',
  'http://[::1/',
  'https://example.com/runs/',
  '*',
  'runs',
]
const PIECES = [
  '/',
  '//',
  '%',
  '%2',
  '%zz',
  '%25',
  '%00',
  '%2F',
  '%2e%2e',
  '..',
  '?',
  '#',
  '&',
  '=',
  'run=',
  `run=${RUN}`,
  '&run=x',
  '%E0%A4%A',
  '%C3%28',
  '%F0%9F%98',
  '%80',
  '%FF',
  '[',
  ']',
  '@',
  ':',
  '\\',
  '~',
  "'",
  '"',
  '<',
  '>',
  '{',
  '|',
  '`',
  'é',
  '😀',
  'runs',
  'iterations',
  'compare',
  RUN,
  '0',
  '99999',
  'a'.repeat(300),
  ' ',
  '\t',
  'http://',
]

/** A request target: a base with a few random insertions and deletions. */
function target(rng: Rng): string {
  let t = pick(rng, BASES)
  for (let n = randInt(rng, 0, 5); n > 0; n--) {
    const at = randInt(rng, 0, t.length + 1)
    if (rng.next() < 0.75) t = t.slice(0, at) + pick(rng, PIECES) + t.slice(at)
    else t = t.slice(0, at) + t.slice(at + randInt(rng, 1, 4))
  }
  return t
}

interface RawAnswer {
  /** The status code, or null when the server closed the connection without an answer. */
  status: number | null
  body: string
}

/** One request with this exact target, over its own connection (`Connection: close`). */
function rawRequest(port: number, method: string, requestTarget: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port })
    const chunks: Buffer[] = []
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no answer in 10 s to ${method} ${requestTarget}`)))
    socket.on('data', (d) => chunks.push(d))
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNRESET') resolve({ status: null, body: '' })
      else reject(error)
    })
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const m = /^HTTP\/1\.1 (\d{3}) /.exec(text)
      resolve({ status: m ? Number(m[1]) : null, body: text.slice(text.indexOf('\r\n\r\n') + 4) })
    })
    socket.write(`${method} ${requestTarget} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`)
  })
}

describe('`seedflow ui` under malformed and random requests (loopback, seeded)', () => {
  let root: string
  let ui: Awaited<ReturnType<typeof startUiServer>>
  let port: number
  const logged: string[] = []

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-ui-fuzz-'))
    const store = new FsArtifactStore(join(root, 'store'))
    const record: RunRecord = {
      runId: RUN,
      config: { algorithm: 'seed', env: 'sokoban' },
      configSha256: 'a'.repeat(64),
      seedflowVersion: 'test',
      createdAt: '2026-12-04T00:00:00.000Z',
    }
    await putJson(store, keys.runRecord(RUN), record)
    ui = await startUiServer({
      store,
      host: '127.0.0.1',
      port: 0,
      trajectories: 4,
      refreshSeconds: 7,
      log: (line) => logged.push(line),
    })
    port = Number(new URL(ui.url).port)
  })
  after(async () => {
    await ui.close()
    await rm(root, { recursive: true, force: true })
  })

  it("answers the issue's reproductions: 400 for a target that is no URL and for malformed percent-escapes", async () => {
    for (const [t, status, message] of [
      ['http://[::1/', 400, 'not a request target this server reads: &quot;http://[::1/&quot;'],
      ['/runs/%E0%A4%A/', 400, 'malformed percent-escape in the path segment &quot;%E0%A4%A&quot;'],
      ['/%zz', 400, 'malformed percent-escape in the path segment &quot;%zz&quot;'],
      ['runs', 400, ''], // Node's parser refuses it before the server sees it
      ['//', 200, 'seedflow runs'], // a path of empty segments, read as /
    ] as const) {
      const r = await rawRequest(port, 'GET', t)
      assert.equal(r.status, status, t)
      assert.ok(r.body.includes(message), `${t}: ${r.body.slice(0, 300)}`)
    }
    assert.equal((await rawRequest(port, 'HEAD', '//')).status, 200)
    assert.deepEqual(logged, [])
  })

  it(`compares each run once and at most ${MAX_COMPARED_RUNS} runs`, async () => {
    const once = await rawRequest(port, 'GET', `/compare?run=${RUN}`)
    const started = performance.now()
    const repeated = await rawRequest(port, 'GET', `/compare?${`run=${RUN}&`.repeat(300)}`)
    const seconds = (performance.now() - started) / 1000
    assert.equal(repeated.status, 200)
    const made = (body: string) => body.replace(/Made [0-9TZ:.-]+ from/, 'Made from')
    assert.equal(made(repeated.body), made(once.body), 'the same page as the run once')
    assert.ok(seconds < 10, `300 copies of one run took ${seconds.toFixed(1)} s`)
    const many = Array.from({ length: MAX_COMPARED_RUNS + 1 }, (_, i) => `run=r${i}`).join('&')
    const refused = await rawRequest(port, 'GET', `/compare?${many}`)
    assert.equal(refused.status, 400)
    assert.ok(refused.body.includes(`compare at most ${MAX_COMPARED_RUNS} runs side by side, not 11`))
  })

  it(`survives ${REQUESTS} random request targets (seed ${SEED}) without a 5xx, then serves a good request`, async () => {
    const rng = mulberry32(SEED)
    const statuses = new Map<string, number>()
    const bad: string[] = []
    for (let i = 0; i < REQUESTS; i++) {
      const method = rng.next() < 0.9 ? 'GET' : 'HEAD'
      const t = target(rng)
      const { status } = await rawRequest(port, method, t)
      statuses.set(String(status), (statuses.get(String(status)) ?? 0) + 1)
      if (status === null || status >= 500) bad.push(`${status} ${method} ${JSON.stringify(t)}`)
    }
    process.stdout.write(
      `# statuses over ${REQUESTS} random targets: ${JSON.stringify(Object.fromEntries(statuses))}\n`,
    )
    assert.deepEqual(bad.slice(0, 10), [], `${bad.length} requests without a good answer (first 10 shown)`)
    assert.deepEqual(logged, [])
    const index = await fetch(ui.url)
    assert.equal(index.status, 200)
    assert.match(await index.text(), new RegExp(`href="/runs/${RUN}/"`))
    assert.equal((await fetch(new URL(`/runs/${RUN}/`, ui.url))).status, 200)
  })
})
