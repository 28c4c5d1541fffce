// A SEED run on a user's own environment: the Python example (examples/text-game/server.py, from a fresh venv)
// named by URL in the run config, through the real pipeline (Temporal dev server, S3 store). The run trains on it
// end to end and records the server's identity; the server killed outright mid-rollout and started again fails
// the episodes that were live, counted in the rollout's manifest and the iteration's metrics, and the run
// completes; a server that is down refuses the run at planRun, by its URL.
import assert from 'node:assert/strict'
import { createServer, request, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { WorkflowFailedError } from '@temporalio/client'
import type { ActivityInterceptorsFactory } from '@temporalio/worker'
import type { RolloutTrajectory } from '../../compute/rollout.ts'
import { serveEnv } from '../../envs/http/index.ts'
import { freePort } from '../../infra/ports.ts'
import type { RunPlan } from '../../records/contracts.ts'
import type { IterationMetricsRecord } from '../../records/iteration-metrics.ts'
import { decodeJsonlGz } from '../../records/jsonl.ts'
import type { PhaseManifest } from '../../records/phase-manifest.ts'
import type { RunRecord } from '../../records/record-run.ts'
import { readRunData } from '../../report/run-data.ts'
import { runPage } from '../../report/run-page.ts'
import { runConfig } from '../../seed/config.ts'
import { smokeSokobanPreset } from '../../seed/presets/smoke.ts'
import { getJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import { microConfig } from '../compute/micro.ts'
import { type PipelineHarness, startPipeline } from './pipeline-harness.ts'
import { type PythonEnv, startPythonEnv } from './python-env.ts'

const PREFIX = `remote-env-run-${process.pid}`

/** The smoke run's settings on the text game, the server named by URL (the prompt rendered from its observations). */
function textGameConfig(baseUrl: string) {
  const smoke = smokeSokobanPreset('seed')
  return runConfig({
    ...smoke,
    env: {
      kind: 'http',
      baseUrl,
      name: 'text-game',
      maxSteps: 12,
      stop: ['</action>'],
      timeoutSeconds: 5,
      prompt: {
        instruction:
          'A row of rooms. Your task is: take the key, then open the locked door.\nReply <think>…</think><action>…</action> with one admissible action.',
        historyLength: 1,
      },
    },
    stage2: { ...smoke.stage2, iterations: 1 },
    evaluation: { ...smoke.evaluation, tasks: 4 },
  })
}

/**
 * A proxy in front of the server that, once armed, kills the server at the next `POST /step` (the request dies
 * with it) and starts it again: every episode it held is lost, as in a crash and a restart.
 */
async function startKillingProxy(
  env: PythonEnv,
): Promise<{ url: string; arm(): void; kills: number; close(): Promise<void> }> {
  let armed = false
  let kills = 0
  const server: Server = createServer((req, res) => {
    if (armed && req.method === 'POST' && req.url === '/step') {
      armed = false
      kills++
      void env.kill().then(() => {
        req.socket.destroy()
        return env.restart()
      })
      return
    }
    const upstream = request(
      { host: '127.0.0.1', port: env.port, method: req.method, path: req.url, headers: req.headers },
      (reply) => {
        res.writeHead(reply.statusCode ?? 502, reply.headers)
        reply.pipe(res)
      },
    )
    upstream.on('error', () => req.socket.destroy())
    req.pipe(upstream)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    arm: () => {
      armed = true
    },
    get kills() {
      return kills
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

describe('a seed run on an environment server of the user (the Python example)', () => {
  let env: PythonEnv
  let proxy: Awaited<ReturnType<typeof startKillingProxy>>
  let harness: PipelineHarness
  /** Runs whose first Stage 2 rollout arms the proxy. */
  const killIn = new Set<string>()
  const arming: ActivityInterceptorsFactory = (ctx) => ({
    inbound: {
      async execute(input, next) {
        const run = (ctx.info.workflowExecution?.workflowId ?? '').split('/')[0] as string
        if (ctx.info.activityType === 'rollout' && killIn.delete(run)) proxy.arm()
        return next(input)
      },
    },
  })

  before(async () => {
    env = await startPythonEnv()
    proxy = await startKillingProxy(env)
    harness = await startPipeline(PREFIX, { activityInterceptors: [arming] })
  })
  after(async () => {
    await harness?.close()
    await proxy?.close()
    await env?.stop()
  })

  it('trains on it through Temporal and S3, and records the server in run.json', async () => {
    const runId = `text-game-${process.pid}`
    const result = await harness.run(runId, textGameConfig(env.url))
    assert.ok(result.evaluations.length >= 3, `evaluations: ${result.evaluations.map((e) => e.label).join(', ')}`)
    const record = (await getJson(harness.store, keys.runRecord(runId))) as RunRecord
    assert.deepEqual(record.environment, {
      kind: 'http',
      baseUrl: env.url,
      name: 'text-game',
      version: '1.0.0',
      routes: ['expert_action', 'oracle'],
    })
    const manifest = (await getJson(harness.store, keys.phaseManifest(runId, 0, 'rollout', 0))) as PhaseManifest
    const rollouts = manifest.outputs.rollouts as { key: string }
    const trajectories = decodeJsonlGz(await harness.store.get(rollouts.key), rollouts.key) as RolloutTrajectory[]
    assert.ok(trajectories.length > 0)
    for (const t of trajectories) {
      assert.equal(t.trajectory.env, 'text-game')
      assert.equal(t.failure, undefined)
      assert.ok(t.steps.length > 0 && t.steps[0]!.promptText.startsWith('A row of rooms. Your task is:'))
    }
  })

  it('completes when the server is killed mid-rollout and restarted; the failed episodes are counted', async () => {
    const runId = `text-game-kill-${process.pid}`
    killIn.add(runId)
    await harness.run(runId, textGameConfig(proxy.url))
    assert.equal(proxy.kills, 1, 'the server was killed once, at a step of the first rollout')
    const { shards } = (await getJson(harness.store, keys.runPlan(runId))) as RunPlan
    let failed = 0
    for (let shard = 0; shard < shards; shard++) {
      const manifest = (await getJson(harness.store, keys.phaseManifest(runId, 0, 'rollout', shard))) as PhaseManifest
      failed += manifest.stats?.failedEpisodes ?? 0
    }
    assert.ok(failed > 0, `failed episodes in the rollout manifests: ${failed}`)
    const metrics = (await getJson(harness.store, keys.metrics(runId, 0))) as IterationMetricsRecord
    assert.equal(metrics.metrics['rollout/failed_episodes'], failed)
    // and the report draws them
    const page = await runPage([await readRunData(harness.store, runId)], {
      links: { skills: (run, k) => `${run}/iteration-${k}.html` },
    })
    assert.match(page, /Episodes the environment failed/)
  })

  it('gives the built-in run, byte for byte, on `seedflow env serve sokoban`: rollouts, rewards, evaluations, checkpoints', async () => {
    const served = await serveEnv('sokoban', { port: 0, host: '127.0.0.1' })
    try {
      const builtin = { ...microConfig('seed'), evaluation: { ...microConfig('seed').evaluation, tasks: 4, every: 1 } }
      const remote = runConfig({
        ...builtin,
        env: { kind: 'http', baseUrl: served.url, name: 'sokoban', maxSteps: 15, stop: ['</action>'] },
      })
      const ids = { builtin: `same-builtin-${process.pid}`, remote: `same-remote-${process.pid}` }
      const a = await harness.run(ids.builtin, builtin)
      const b = await harness.run(ids.remote, remote)
      assert.deepEqual(
        b.evaluations.map((e) => [e.label, e.success, e.standardError]),
        a.evaluations.map((e) => [e.label, e.success, e.standardError]),
      )
      assert.equal(b.checkpoint?.sha256, a.checkpoint?.sha256, 'the final checkpoint')
      const { shards, iterations } = (await getJson(harness.store, keys.runPlan(ids.builtin))) as RunPlan
      let steps = 0
      for (let k = 0; k < iterations; k++)
        for (let shard = 0; shard < shards; shard++) {
          const read = async (runId: string) => {
            const m = (await getJson(harness.store, keys.phaseManifest(runId, k, 'rollout', shard))) as PhaseManifest
            const ref = m.outputs.rollouts as { key: string }
            return decodeJsonlGz(await harness.store.get(ref.key), ref.key) as RolloutTrajectory[]
          }
          const [want, got] = [await read(ids.builtin), await read(ids.remote)]
          assert.deepEqual(got, want, `iteration ${k} shard ${shard}: tokens, actions, rewards, records`)
          steps += want.reduce((n, t) => n + t.steps.length, 0)
        }
      assert.ok(steps > 0)
    } finally {
      await served.close()
    }
  })

  it('refuses the run at planRun when the server does not answer, naming its URL', async () => {
    const down = `http://127.0.0.1:${await freePort()}`
    const error = await harness.run(`text-game-down-${process.pid}`, textGameConfig(down)).then(
      () => undefined,
      (e: unknown) => e,
    )
    assert.ok(error instanceof WorkflowFailedError, String(error))
    // the refusal is the cause of the failed activity that failed the workflow
    let message = ''
    for (let e: Error | undefined = error; e; e = e.cause as Error | undefined) message += `${e.message}\n`
    assert.ok(message.includes(down) && /ECONNREFUSED/.test(message), message)
  })
})
