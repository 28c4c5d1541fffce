// A rollout whose episodes live on an environment server (`seedflow env serve sokoban`, in process here) plays
// the same episodes as the built-in environment with the same seeds: the same response tokens, actions, validity,
// rewards, expert actions and trajectory records. Each turn's steps go to the server together, and each episode is
// closed on the server when the rollout has its record.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { rollout } from '../../compute/rollout.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { HttpEnvClient, remoteEpisodes, type ServedEnv, serveEnv } from '../../envs/http/index.ts'
import { microCheckpoint, microConfig, microPolicy, microRolloutInput } from './micro.ts'

describe('rollout over the environment protocol', () => {
  const engine = createLocalEngine({ threads: 1 })
  const config = microConfig()
  let served: ServedEnv
  before(async () => {
    served = await serveEnv('sokoban', { port: 0, host: '127.0.0.1' })
  })
  after(async () => {
    await served.close()
    await engine.close()
  })

  it('plays the built-in episodes over the wire, step for step', async () => {
    const policy = microPolicy(engine, await microCheckpoint(engine, config))
    const input = { ...microRolloutInput(config, 5), maxEnvSteps: 6 }
    const local = await rollout(policy, input)
    const client = new HttpEnvClient(served.url, { timeoutMs: 10_000, retries: 0 })
    const remote = await rollout(policy, { ...input, episodes: remoteEpisodes(client) })
    assert.equal(remote.trajectories.length, local.trajectories.length)
    for (const [i, t] of remote.trajectories.entries()) {
      const want = local.trajectories[i]!
      assert.deepEqual(t.steps, want.steps, `trajectory ${i}: steps`)
      assert.deepEqual(t.trajectory, want.trajectory, `trajectory ${i}: the environment's record`)
      assert.deepEqual([t.won, t.score, t.totalReward], [want.won, want.score, want.totalReward])
    }
    assert.ok(
      local.trajectories.some((t) => t.steps.length > 1),
      'some episode took more than one step',
    )
    // every episode was closed on the server: its ids answer 404 now
    await assert.rejects(client.observation(0), { name: 'EnvHttpError', kind: 'not-found' })
  })
})
