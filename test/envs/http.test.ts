// Served over HTTP and driven through the client, every environment gives exactly the in-process trajectory.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { HttpEnvClient, type ServedEnv, serveEnv } from '../../envs/http/index.ts'
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
