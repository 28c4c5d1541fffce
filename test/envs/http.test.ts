// Served over HTTP and driven through the client, every environment gives exactly the in-process trajectory;
// the server refuses loosely written episode ids, caps the open episodes and evicts idle ones.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { type EnvHttpError, HttpEnvClient, type ServedEnv, type ServeOptions, serveEnv } from '../../envs/http/index.ts'
import { ENVS } from '../../envs/index.ts'
import { mulberry32 } from '../../envs/rng.ts'
import type { Env, Episode } from '../../envs/types.ts'

/** Expert moves, a random move every third step and one unusable reply: the same script for both sides. */
function scriptedResponses(env: Env, ep: Episode, n: number): string[] {
  const rng = mulberry32(99)
  const out: string[] = []
  for (let i = 0; i < n && !ep.done; i++) {
    const response =
      i === 1 ? 'no tags here' : env.formatResponse(i % 3 === 2 ? ep.randomAction(rng) : ep.expertAction(), `step ${i}`)
    out.push(response)
    ep.step(response)
  }
  return out
}

for (const [name, env] of Object.entries(ENVS)) {
  describe(`http: ${name}`, () => {
    let served: ServedEnv
    let client: HttpEnvClient
    before(async () => {
      served = await serveEnv(name, { port: 0, host: '127.0.0.1' })
      client = new HttpEnvClient(served.url, { timeoutMs: 5000, retries: 0 })
    })
    after(() => served.close())

    it('gives the in-process trajectory for the same seed and actions', async () => {
      const ref = env.task('validation', 17)
      const local = env.reset(ref)
      const responses = scriptedResponses(env, env.reset(ref), env.maxSteps)
      const id = await client.create(ref)
      assert.equal(await client.observation(id), local.observation)
      assert.deepEqual(await client.availableActions(id), local.admissible())
      for (const response of responses) {
        assert.equal(await client.prompt(id), local.prompt())
        const remote = await client.step(id, response)
        const here = local.step(response)
        assert.deepEqual(remote, {
          observation: here.observation,
          reward: here.reward,
          done: here.done,
          info: {
            ...here.info,
            valid: here.valid,
            action: here.action,
            ...(here.reason ? { reason: here.reason } : {}),
          },
        })
      }
      assert.deepEqual(await client.trajectory(id), local.trajectory())
      await client.close(id)
    })

    it('resets an episode to a new task and rejects unknown ids', async () => {
      const id = await client.create({ split: 'train', seed: 1 })
      const r = await client.reset(id, { split: 'train', seed: 2 })
      assert.equal(r.observation, env.reset(env.task('train', 2)).observation)
      await client.close(id)
      await assert.rejects(client.step(id, 'x'), /HTTP 404 .*no episode with id/)
    })
  })
}

it('http client: gives up on an unreachable server after its retries', async () => {
  const client = new HttpEnvClient('http://127.0.0.1:9', { timeoutMs: 500, retries: 1, backoffMs: () => 1 })
  await assert.rejects(client.observation(0), /failed after 2 attempts/)
})

describe('http server: episode ids, the episode cap and the idle TTL', () => {
  const servers: ServedEnv[] = []
  const serve = async (options: ServeOptions = {}) => {
    const served = await serveEnv('sokoban', { port: 0, host: '127.0.0.1', ...options })
    servers.push(served)
    return served
  }
  after(() => Promise.all(servers.map((s) => s.close())))

  /** A raw request: the status, the JSON body and the headers. */
  async function call(served: ServedEnv, method: 'GET' | 'POST', path: string, body?: string) {
    const res = await fetch(`${served.url}${path}`, {
      method,
      ...(body === undefined ? {} : { body, headers: { 'content-type': 'application/json' } }),
    })
    return { status: res.status, json: (await res.json()) as Record<string, unknown>, headers: res.headers }
  }

  it('refuses ids in a body that are not JSON integers ≥ 0, and never reaches episode 0 with them', async () => {
    const served = await serve()
    const id = (await call(served, 'POST', '/create', '{"seed": 3}')).json.id
    assert.equal(id, 0)
    const bad = ['[0]', '"0"', '"0x0"', 'true', 'null', '{}', '-1', '1.5', '-0.5', '9007199254740992', '1e300']
    for (const raw of bad) {
      for (const [path, extra] of [
        ['/step', ', "action": "<action>up</action>"'],
        ['/reset', ''],
        ['/close', ''],
      ] as const) {
        const r = await call(served, 'POST', path, `{"id": ${raw}${extra}}`)
        assert.equal(r.status, 400, `${path} {"id": ${raw}}: ${JSON.stringify(r.json)}`)
        assert.equal(
          r.json.error,
          `id must be a non-negative integer written as a JSON number (0, 1, 2, …: the id /create answered), got ${JSON.stringify(JSON.parse(raw))}`,
        )
      }
    }
    const missing = await call(served, 'POST', '/close', '{}')
    assert.equal(missing.status, 400)
    assert.match(String(missing.json.error), /^id must be a non-negative integer .*, got nothing$/)
    // not JSON at all (0x0, a bare 0, …): the body is refused as a whole
    for (const raw of ['{"id": 0x0}', '{"id": 00}', '0']) {
      const r = await call(served, 'POST', '/close', raw)
      assert.equal(r.status, 400, raw)
      assert.match(String(r.json.error), /^body is not a JSON object/)
    }
    const trajectory = await call(served, 'GET', '/trajectory?id=0')
    assert.equal(trajectory.status, 200)
    assert.equal((trajectory.json.steps as unknown[]).length, 0, 'no refused request stepped or reset episode 0')
    assert.equal((await call(served, 'POST', '/close', '{"id": 0}')).status, 200)
  })

  it('refuses ids in a query that are not plain decimal integers', async () => {
    const served = await serve()
    await call(served, 'POST', '/create', '{}')
    const bad = ['0x0', '1e0', '-1', '1.5', '00', '+0', '%2B0', '0.0', '', '%200', '0%20', 'abc', '9007199254740993']
    for (const raw of bad) {
      for (const route of ['/observation', '/available_actions', '/prompt', '/trajectory']) {
        const r = await call(served, 'GET', `${route}?id=${raw}`)
        assert.equal(r.status, 400, `${route}?id=${raw}`)
        assert.equal(
          r.json.error,
          `?id= must be a non-negative integer in plain decimal (0, 1, 2, …: the id /create answered), got ${JSON.stringify(new URLSearchParams(`id=${raw}`).get('id'))}`,
        )
      }
    }
    assert.equal((await call(served, 'GET', '/observation')).status, 400)
    const twice = await call(served, 'GET', '/observation?id=0&id=0')
    assert.equal(twice.status, 400)
    assert.equal(twice.json.error, '?id= given 2 times; give one episode id')
    assert.equal((await call(served, 'GET', '/observation?id=0')).status, 200)
  })

  it('answers 429 at the episode cap, saying so, until an episode is closed', async () => {
    const served = await serve({ maxEpisodes: 3 })
    const ids = []
    for (let i = 0; i < 3; i++) ids.push((await call(served, 'POST', '/create', '{}')).json.id)
    assert.deepEqual(ids, [0, 1, 2])
    const full = await call(served, 'POST', '/create', '{}')
    assert.equal(full.status, 429)
    assert.equal(
      full.json.error,
      '3 episodes open, the cap; finished episodes are closed with /close or evicted after 30 min idle',
    )
    const retryAfter = Number(full.headers.get('retry-after'))
    assert.ok(retryAfter > 1790 && retryAfter <= 1800, `retry-after ${retryAfter}`)
    assert.equal((await call(served, 'POST', '/close', '{"id": 1}')).status, 200)
    assert.equal((await call(served, 'POST', '/create', '{}')).json.id, 3)
    assert.equal((await call(served, 'POST', '/create', '{}')).status, 429)
    // the client sees the status and the message
    const client = new HttpEnvClient(served.url, { retries: 0 })
    await assert.rejects(client.create(), (e: EnvHttpError) => e.status === 429 && /the cap/.test(e.message))
  })

  it('keeps the cap under concurrent requests', async () => {
    const served = await serve({ maxEpisodes: 5 })
    const created = await Promise.all(Array.from({ length: 20 }, () => call(served, 'POST', '/create', '{}')))
    const ok = created.filter((r) => r.status === 200).map((r) => r.json.id as number)
    assert.equal(ok.length, 5)
    assert.equal(created.filter((r) => r.status === 429).length, 15)
    assert.equal(new Set(ok).size, 5, 'distinct ids')
    // the same episode closed twice at once: one close wins, the other finds it gone
    const [first] = ok
    const twice = await Promise.all([0, 1].map(() => call(served, 'POST', '/close', `{"id": ${first}}`)))
    assert.deepEqual(twice.map((r) => r.status).sort(), [200, 404])
    await Promise.all(ok.slice(1).map((id) => call(served, 'POST', '/close', `{"id": ${id}}`)))
    const again = await Promise.all(Array.from({ length: 12 }, () => call(served, 'POST', '/create', '{}')))
    assert.equal(again.filter((r) => r.status === 200).length, 5, 'closed episodes gave their places back')
    assert.equal(again.filter((r) => r.status === 429).length, 7)
  })

  it('evicts an episode idle for the TTL: its id answers 404 saying so, and its place is free again', async () => {
    let clock = 1_000_000
    const served = await serve({ maxEpisodes: 2, idleTtlMs: 60_000, now: () => clock })
    const a = (await call(served, 'POST', '/create', '{}')).json.id
    const b = (await call(served, 'POST', '/create', '{}')).json.id
    clock += 50_000
    assert.equal((await call(served, 'GET', `/observation?id=${b}`)).status, 200, 'touching b keeps it')
    const full = await call(served, 'POST', '/create', '{}')
    assert.equal(full.status, 429)
    assert.equal(
      full.json.error,
      '2 episodes open, the cap; finished episodes are closed with /close or evicted after 1 min idle',
    )
    assert.equal(full.headers.get('retry-after'), '10', 'a is evicted in 10 s')
    clock += 10_000 // a idle for 60 s, b for 10 s
    const gone = await call(served, 'POST', '/step', `{"id": ${a}, "action": "x"}`)
    assert.equal(gone.status, 404)
    assert.equal(gone.json.error, `no episode with id ${a}: it was evicted after 1 min idle; create a new one`)
    assert.equal((await call(served, 'GET', `/prompt?id=${a}`)).status, 404)
    assert.equal((await call(served, 'GET', `/observation?id=${b}`)).status, 200)
    const c = await call(served, 'POST', '/create', '{}')
    assert.equal(c.status, 200, 'the evicted episode gave its place back')
    await call(served, 'POST', '/close', `{"id": ${b}}`)
    for (const id of [b, 99]) {
      const r = await call(served, 'GET', `/observation?id=${id}`)
      assert.equal(r.status, 404)
      assert.equal(r.json.error, `no episode with id ${id}: unknown, or closed (idle episodes are evicted after 1 min)`)
    }
  })

  it('evicts on the real clock too, and refuses a bad cap or TTL', async () => {
    const served = await serve({ idleTtlMs: 50 })
    const id = (await call(served, 'POST', '/create', '{}')).json.id
    await new Promise((resolve) => setTimeout(resolve, 120))
    const r = await call(served, 'GET', `/observation?id=${id}`)
    assert.equal(r.status, 404)
    assert.equal(r.json.error, `no episode with id ${id}: it was evicted after 50 ms idle; create a new one`)
    await assert.rejects(serveEnv('sokoban', { maxEpisodes: 0 }), /maxEpisodes must be a positive integer/)
    await assert.rejects(serveEnv('sokoban', { idleTtlMs: -1 }), /idleTtlMs must be a positive number/)
  })
})
