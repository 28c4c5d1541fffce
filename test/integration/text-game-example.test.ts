// The Python example environment (examples/text-game/server.py) as a user runs it: the python of a fresh venv
// (standard library only, nothing installed), a free 127.0.0.1 port, driven through seedflow's HttpEnvClient.
// The expert wins every task it is given; an unusable reply is a step like any other; bad ids are typed failures;
// /oracle writes a skill for a finished trajectory. Stopped by PID.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { EnvHttpError, HttpEnvClient } from '../../envs/http/client.ts'
import type { StepRecord, Trajectory } from '../../envs/types.ts'
import { type PythonEnv, startPythonEnv } from './python-env.ts'

const MAX_STEPS = 12

let server: PythonEnv
let baseUrl: string
let client: HttpEnvClient

before(async () => {
  server = await startPythonEnv()
  baseUrl = server.url
  client = new HttpEnvClient(baseUrl, { timeoutMs: 5000, retries: 0 })
})

after(async () => {
  await server?.stop()
})

async function getJson(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${baseUrl}${path}`, { signal: AbortSignal.timeout(5000) })
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

async function postJson(path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(5000),
  })
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

/** The expert's next action and sub-goal, by plain fetch (the reply as the server writes it). */
async function expert(id: number): Promise<{ action: string; thought: string }> {
  const { status, body } = await getJson(`/expert_action?id=${id}`)
  assert.equal(status, 200, JSON.stringify(body))
  assert.equal(typeof body.action, 'string')
  assert.equal(typeof body.thought, 'string')
  return { action: body.action as string, thought: body.thought as string }
}

/** Plays one task to the end after the expert, recording the episode as seedflow's Trajectory. */
async function playExpert(seed: number): Promise<Trajectory> {
  const id = await client.create({ split: 'train', seed })
  const first = await client.reset(id, { split: 'train', seed })
  assert.equal(first.done, false)
  assert.equal(first.reward, 0)
  assert.ok(first.observation.length < 300, first.observation)
  let observation = first.observation
  const steps: StepRecord[] = []
  let done = false
  let last = first
  while (!done) {
    assert.ok(steps.length < MAX_STEPS, `train:${seed} not won in ${MAX_STEPS} steps`)
    const { action, thought } = await expert(id)
    assert.deepEqual(await client.expert(id), { action, thought })
    const admissible = await client.availableActions(id)
    assert.ok(admissible?.includes(action), `${action} not in ${JSON.stringify(admissible)}`)
    const response = `<think>${thought}</think>\n<action>${action}</action>`
    const r = await client.step(id, response)
    assert.equal(r.info.valid, true)
    assert.equal(r.info.action, action)
    assert.ok(r.observation.length < 300, r.observation)
    assert.equal(await client.observation(id), r.observation)
    steps.push({ observation, response, action, valid: true, reward: r.reward })
    observation = r.observation
    done = r.done
    last = r
  }
  assert.equal(last.info.won, true, `train:${seed} ended without a win: ${last.observation}`)
  assert.equal(last.info.score, 1)
  assert.equal(last.info.family, 'text-game')
  assert.equal(last.reward, 1)
  assert.ok(steps.length <= 8, `the expert took ${steps.length} steps on train:${seed}`)
  await assert.rejects(client.step(id, '<action>left</action>'), (e: unknown) => {
    assert.ok(e instanceof EnvHttpError)
    assert.equal(e.kind, 'rejected')
    assert.equal(e.status, 409)
    return true
  })
  await client.close(id)
  return {
    env: 'text-game',
    task: { split: 'train', seed },
    taskText: first.observation,
    steps,
    finalObservation: observation,
    info: { won: true, score: 1, family: 'text-game' },
    totalReward: steps.reduce((sum, s) => sum + s.reward, 0),
  }
}

test('GET /info names the game', async () => {
  const { status, body } = await getJson('/info')
  assert.equal(status, 200)
  // routes: the optional routes it has, as seedflow's client reads them from /info
  assert.deepEqual(body, {
    name: 'text-game',
    version: body.version,
    max_steps: MAX_STEPS,
    routes: ['expert_action', 'oracle'],
  })
  assert.equal(typeof body.version, 'string')
})

test('the expert wins 20 train tasks within 12 steps; the same (split, seed) gives the same task', async () => {
  const lengths: number[] = []
  for (let seed = 0; seed < 20; seed++) lengths.push((await playExpert(seed)).steps.length)
  assert.ok(new Set(lengths).size > 1, `every task took ${lengths[0]} steps: the tasks do not vary`)
  const a = await client.create({ split: 'train', seed: 5 })
  const b = await client.create({ split: 'train', seed: 5 })
  assert.equal(await client.observation(a), await client.observation(b))
  // AgentGym's clients send data_idx: the server reads it as the seed
  const viaDataIdx = await postJson('/reset', { id: b, data_idx: 5 })
  assert.equal(viaDataIdx.body.observation, await client.observation(a))
  assert.equal(viaDataIdx.body.state, viaDataIdx.body.observation)
  await client.close(a)
  await client.close(b)
})

test('an unusable or inadmissible reply is a step: valid false, action null, a reason, the episode goes on', async () => {
  const id = await client.create({ split: 'validation', seed: 3 })
  const start = await client.reset(id, { split: 'validation', seed: 3 })
  const r = await client.step(id, 'I think I will go left')
  assert.equal(r.done, false)
  assert.equal(r.reward, 0)
  assert.equal(r.info.valid, false)
  assert.equal(r.info.action, null)
  assert.match(r.info.reason ?? '', /missing <action>/)
  assert.equal(r.observation, start.observation)
  const odd = await client.step(id, '<think>x</think><action>fly away</action>')
  assert.equal(odd.info.valid, false)
  assert.equal(odd.info.action, null)
  assert.match(odd.info.reason ?? '', /not admissible/)
  // the episode goes on and still can be won; the two lost moves count toward the 12
  let steps = 2
  let last = odd
  while (!last.done) {
    const { action, thought } = await expert(id)
    last = await client.step(id, `<think>${thought}</think>\n<action>${action}</action>`)
    steps++
  }
  assert.equal(last.info.won, true)
  assert.ok(steps <= MAX_STEPS)
  await client.close(id)
})

test('an episode not won in 12 steps ends', async () => {
  const id = await client.create({ split: 'test-unseen', seed: 1 })
  let r = await client.reset(id)
  let steps = 0
  while (!r.done) {
    r = await client.step(id, 'no action here')
    steps++
  }
  assert.equal(steps, MAX_STEPS)
  assert.equal(r.info.won, false)
  await client.close(id)
})

test('bad and unknown ids are typed failures: 400 rejected, 404 not-found', async () => {
  const kind = (expected: string, status: number) => (e: unknown) => {
    assert.ok(e instanceof EnvHttpError, String(e))
    assert.equal(e.kind, expected)
    assert.equal(e.status, status)
    return true
  }
  await assert.rejects(client.step(987_654, '<action>left</action>'), kind('not-found', 404))
  await assert.rejects(client.observation(987_654), kind('not-found', 404))
  await assert.rejects(client.step(-1, 'x'), kind('rejected', 400))
  await assert.rejects(client.step(1.5, 'x'), kind('rejected', 400))
  for (const id of ['3', true, 3.5, [3], null]) {
    const { status, body } = await postJson('/step', { id, action: 'x' })
    assert.equal(status, 400, `id ${JSON.stringify(id)}`)
    assert.equal(typeof body.error, 'string')
  }
  for (const id of ['03', '0x3', '3e0', '', '-1']) {
    const { status } = await getJson(`/observation?id=${encodeURIComponent(id)}`)
    assert.equal(status, 400, `?id=${id}`)
  }
  assert.equal((await getJson('/prompt?id=0')).status, 404, 'the example has no /prompt route')
  assert.equal((await getJson('/trajectory?id=0')).status, 404, 'the example has no /trajectory route')
  const closed = await client.create()
  await client.close(closed)
  await assert.rejects(client.close(closed), kind('not-found', 404))
})

test('POST /oracle writes a skill for a finished trajectory from its own text', async () => {
  const trajectory = await playExpert(11)
  const { status, body } = await postJson('/oracle', { trajectory })
  assert.equal(status, 200, JSON.stringify(body))
  assert.equal(typeof body.episode_summary, 'string')
  assert.equal(typeof body.episode_skill, 'string')
  const entities = body.entities as string[]
  assert.ok(Array.isArray(entities) && entities.length > 0)
  const text = [trajectory.taskText, ...trajectory.steps.map((s) => `${s.observation} ${s.response}`)].join('\n')
  for (const entity of entities) assert.ok(text.includes(entity), `${entity} is not in the trajectory`)
  // the skill names the moves this trajectory made
  for (const step of trajectory.steps) assert.ok((body.episode_skill as string).includes(step.action as string))
  assert.equal((await postJson('/oracle', {})).status, 400)
})
