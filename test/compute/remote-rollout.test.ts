// A run's environment on a server (the run config's `env: {kind: "http", …}`): on `seedflow env serve sokoban`
// (in process here) the rollout plays the built-in environment's episodes step for step and the warm-start records
// the same demonstrations; a server without seedflow's /prompt and /trajectory gets its prompt rendered from the
// observations and its record kept by the client; a server that goes away mid-rollout fails its live episodes,
// counted, and the rollout completes; planRun's check refuses a server that does not answer or lacks a route.
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { environmentOf, remoteEnvironment } from '../../compute/environment.ts'
import { checkRemoteEnvironment } from '../../compute/environment-check.ts'
import { rollout } from '../../compute/rollout.ts'
import { demonstrations, warmstart } from '../../compute/warmstart.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { HttpEnvClient, type OptionalRoute, type ServedEnv, serveEnv } from '../../envs/http/index.ts'
import { getEnv } from '../../envs/index.ts'
import { freePort } from '../../infra/ports.ts'
import type { Checkpoint } from '../../policy/checkpoint.ts'
import { HttpEnvSchema, runConfig } from '../../seed/config.ts'
import { insertBlock } from '../../seed/skill-context.ts'
import { microCheckpoint, microConfig, microPolicy, microRolloutInput, microWarmstartInput } from './micro.ts'

const httpEnv = (baseUrl: string, extra: Record<string, unknown> = {}) =>
  HttpEnvSchema.parse({ kind: 'http', baseUrl, name: 'sokoban', maxSteps: 15, stop: ['</action>'], ...extra })

describe('a run on an environment server', () => {
  const engine = createLocalEngine({ threads: 1 })
  const config = microConfig()
  let served: ServedEnv
  let checkpoint: Checkpoint
  before(async () => {
    served = await serveEnv('sokoban', { port: 0, host: '127.0.0.1', version: 'test-1' })
    checkpoint = await microCheckpoint(engine, config)
  })
  after(async () => {
    await served.close()
    await engine.close()
  })

  it('plays the built-in episodes over the wire, step for step', async () => {
    const policy = microPolicy(engine, checkpoint)
    const input = { ...microRolloutInput(config, 5), maxEnvSteps: 6 }
    const local = await rollout(policy, input)
    const remote = await rollout(policy, { ...input, env: httpEnv(served.url) })
    assert.equal(remote.trajectories.length, local.trajectories.length)
    for (const [i, t] of remote.trajectories.entries()) {
      const want = local.trajectories[i]!
      assert.deepEqual(t.steps, want.steps, `trajectory ${i}: steps`)
      assert.deepEqual(t.trajectory, want.trajectory, `trajectory ${i}: the environment's record`)
      assert.deepEqual([t.won, t.score, t.totalReward], [want.won, want.score, want.totalReward])
    }
    assert.equal(remote.stats.failedEpisodes, 0)
    assert.ok(
      local.trajectories.some((t) => t.steps.length > 1),
      'some episode took more than one step',
    )
    // every episode was closed on the server: its ids answer 404 now
    const client = new HttpEnvClient(served.url, { timeoutMs: 10_000, retries: 0 })
    await assert.rejects(client.observation(0), { name: 'EnvHttpError', kind: 'not-found' })
  })

  it("records the warm-start's demonstrations over the wire as the built-in environment gives them", async () => {
    const ws = { ...config.warmstart!, demoTasks: 6, mistakeRate: 0.3, labelNoise: 0.2, skillDemoShare: 0.5 }
    const local = await demonstrations('sokoban', ws, config.prompt, 7)
    const remote = await demonstrations(httpEnv(served.url), ws, config.prompt, 7)
    assert.ok(local.plain.length > 0 && local.skilled.length > 0, 'plain and skill-reading demonstrations')
    assert.deepEqual(remote, local)
  })

  it('renders the prompt from the observations and keeps the record where the server has no /prompt or /trajectory', async () => {
    const bare = await serveEnv('sokoban', { port: 0, host: '127.0.0.1', routes: ['expert_action'] })
    try {
      const instruction = 'Sokoban.\nYour task is: push the box X onto the target O.'
      const env = environmentOf(httpEnv(bare.url, { prompt: { instruction, historyLength: 1 } }))
      const builtin = getEnv('sokoban')
      const task = env.task('train', 3)
      const episode = await env.open(task)
      const twin = builtin.reset(task)
      const first = await episode.prompt()
      assert.ok(first.startsWith(instruction))
      assert.ok(first.includes(`your current observation is:\n${twin.observation}`))
      assert.match(first, /admissible actions of the current situation are: up, down, left, right\./)
      for (const response of ['<action>up</action>', 'no action here', '<action>left</action>']) {
        await episode.step(response)
        twin.step(response)
      }
      const prompt = await episode.prompt()
      // one history entry (historyLength 1), in the format the run's history window and fitting find
      assert.equal(prompt.match(/\[Observation \d+: '/g)?.length, 1)
      assert.match(prompt, /\[Observation 3: '[\s\S]*', Action 3: 'left'\]/)
      // a skill goes after the instruction's task line
      const skilled = insertBlock(prompt, 'SKILL')
      assert.ok(skilled.indexOf('SKILL') > skilled.indexOf('Your task is:'))
      assert.ok(skilled.indexOf('SKILL') < skilled.indexOf('Prior to this step'))
      const kept = await episode.trajectory()
      const want = twin.trajectory()
      assert.deepEqual(kept.steps, want.steps)
      assert.equal(kept.finalObservation, want.finalObservation)
      assert.equal(kept.totalReward, want.totalReward)
      await episode.close()
      // without an instruction, a server without /prompt cannot be played, and says why
      await assert.rejects(
        environmentOf(httpEnv(bare.url)).open(task),
        /has no \/prompt route.*env\.prompt\.instruction/,
      )
    } finally {
      await bare.close()
    }
  })

  it("writes a demonstration's response by env.responseFormat, each field replaced once", () => {
    const env = environmentOf(httpEnv('http://127.0.0.1:9', { responseFormat: '<think>{thought}</think>[{action}]' }))
    assert.equal(env.formatResponse('go north', 'find {action}'), '<think>find {action}</think>[go north]')
    assert.equal(env.formatResponse('up'), '<think></think>[up]')
  })

  it('warm-starts from a JSONL file of demonstrations where the server has no expert', async () => {
    const bare = await serveEnv('sokoban', { port: 0, host: '127.0.0.1', routes: ['prompt', 'trajectory', 'oracle'] })
    const dir = await mkdtemp(join(tmpdir(), 'seedflow-demos-'))
    try {
      // the pairs a user would record: the built-in expert's prompts and responses
      const env = getEnv('sokoban')
      const pairs: { prompt: string; response: string }[] = []
      for (let seed = 0; seed < 8; seed++) {
        const episode = env.reset(env.task('train', seed))
        while (!episode.done) {
          const response = env.formatResponse(episode.expertAction())
          pairs.push({ prompt: episode.prompt({ compact: true }), response })
          episode.step(response)
        }
      }
      const file = join(dir, 'demos.jsonl')
      await writeFile(file, `${pairs.map((p) => JSON.stringify(p)).join('\n')}\n`)
      const spec = httpEnv(bare.url)
      const ws = { ...config.warmstart!, demonstrationsFile: file, skillDemoShare: 0, analyzerShare: 0 }
      const demos = await demonstrations(spec, ws, config.prompt, 3)
      assert.deepEqual(
        demos.plain.map((d) => d.response),
        pairs.map((p) => p.response),
      )
      assert.deepEqual([demos.skilled.length, demos.analyses.length], [0, 0])
      // the run needs no expert now; the warm-start trains on the file
      const withFile = runConfig({
        ...config,
        env: spec,
        warmstart: ws,
        stage1: { ...config.stage1, annotator: { kind: 'oracle' } },
      })
      assert.deepEqual((await checkRemoteEnvironment(spec, withFile)).routes, ['prompt', 'trajectory', 'oracle'])
      const r = await warmstart(engine, { ...microWarmstartInput(withFile), env: spec })
      assert.equal(r.stats.plainPairs, pairs.length)
      // a bad line is refused with its number and field
      await writeFile(file, `${JSON.stringify(pairs[0])}\n{"prompt": "x"}\n`)
      await assert.rejects(demonstrations(spec, ws, config.prompt, 3), /demos\.jsonl, line 2: response: /)
      // and the file's settings are checked: it has no skills to read
      assert.throws(
        () => runConfig({ ...config, warmstart: { ...ws, skillDemoShare: 0.3 } }),
        /warmstart\.skillDemoShare: demonstrations from a file have no oracle skills/,
      )
    } finally {
      await bare.close()
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('ends the live episodes of a server that restarts mid-rollout as failed, counted, and completes', async () => {
    const port = await freePort()
    let server = await serveEnv('sokoban', { port, host: '127.0.0.1' })
    const policy = microPolicy(engine, checkpoint)
    let restarted = false
    try {
      const r = await rollout(policy, {
        ...microRolloutInput(config, 5),
        maxEnvSteps: 6,
        env: httpEnv(server.url, { timeoutSeconds: 5, retries: 1 }),
        onProgress: () => {
          if (restarted) return
          restarted = true
          // the server loses its episodes: the next request of each live episode answers 404
          void server.close().then(async () => {
            server = await serveEnv('sokoban', { port, host: '127.0.0.1' })
          })
        },
      })
      assert.ok(restarted)
      const failed = r.trajectories.filter((t) => t.failure)
      assert.ok(failed.length > 0, 'some episode was live when the server restarted')
      assert.equal(r.stats.failedEpisodes, failed.length)
      for (const t of failed) {
        assert.deepEqual(t.steps, [], 'none of its steps is kept')
        assert.equal(t.won, false)
        assert.match(t.failure!.kind, /not-found|unreachable/)
        assert.ok(t.failure!.message.includes(`127.0.0.1:${port}`), t.failure!.message)
      }
      assert.equal(r.trajectories.length, 4)
    } finally {
      await server.close()
    }
  })

  it('sends the key from the variable apiKeyEnv names, read on the worker, and refuses without it; never stored', async () => {
    const seen: (string | undefined)[] = []
    const keyed = createServer((req, res) => {
      seen.push(req.headers.authorization)
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ name: 'keyed', routes: [] }))
    })
    await new Promise<void>((resolve) => keyed.listen(0, '127.0.0.1', resolve))
    const baseUrl = `http://127.0.0.1:${(keyed.address() as AddressInfo).port}`
    const variable = `SEEDFLOW_TEST_ENV_KEY_${process.pid}`
    try {
      const spec = httpEnv(baseUrl, { apiKeyEnv: variable })
      assert.throws(
        () => remoteEnvironment(spec),
        new RegExp(`needs the key in \\$${variable}, which is not set on this worker`),
      )
      process.env[variable] = 'sk-env-test'
      assert.deepEqual(await remoteEnvironment(spec).info(), { name: 'keyed', routes: [] })
      assert.deepEqual(seen, ['Bearer sk-env-test'])
      // the run config (what run.json records) names the variable, never the key
      assert.ok(!JSON.stringify(runConfig({ ...config, env: spec })).includes('sk-env-test'))
    } finally {
      delete process.env[variable]
      keyed.close()
    }
  })

  it('refuses at planRun a server that does not answer, or lacks a route the run needs, by URL and route; records one that serves', async () => {
    const down = `http://127.0.0.1:${await freePort()}`
    await assert.rejects(
      checkRemoteEnvironment(httpEnv(down, { retries: 0 }), config),
      (e: Error) => e.message.includes(down) && /cannot be used.*ECONNREFUSED/.test(e.message),
    )
    const routes: OptionalRoute[] = ['prompt', 'trajectory']
    const bare = await serveEnv('sokoban', { port: 0, host: '127.0.0.1', routes })
    try {
      await assert.rejects(checkRemoteEnvironment(httpEnv(bare.url), config), (e: Error) => {
        assert.ok(e.message.includes(bare.url), e.message)
        assert.match(e.message, /lacks \/expert_action \(the warm-start clones the expert.*\/oracle/)
        assert.match(e.message, /lists \/prompt, \/trajectory/)
        return true
      })
      // an imported model annotated by an endpoint needs neither
      const imported = {
        ...config,
        warmstart: null,
        stage1: {
          ...config.stage1,
          annotator: { kind: 'openai' as const, baseUrl: 'http://127.0.0.1:1/v1', model: 'm' },
        },
      }
      assert.equal((await checkRemoteEnvironment(httpEnv(bare.url), imported as typeof config)).routes.length, 2)
      // grpo starts from the base and reads no library: no annotator, no oracle (but its warm-start clones the expert)
      await assert.rejects(checkRemoteEnvironment(httpEnv(bare.url), microConfig('grpo')), (e: Error) => {
        assert.doesNotMatch(e.message, /Stage 1 annotates/)
        return /\/expert_action/.test(e.message)
      })
    } finally {
      await bare.close()
    }
    assert.deepEqual(await checkRemoteEnvironment(httpEnv(served.url), config), {
      kind: 'http',
      baseUrl: served.url,
      name: 'sokoban',
      version: 'test-1',
      routes: ['prompt', 'trajectory', 'expert_action', 'oracle'],
    })
    // skill steps shown blind are rendered by the run: a server that renders its own prompts is refused
    const blind = { ...config, warmstart: { ...config.warmstart!, skillBlind: 0.5 } }
    await assert.rejects(
      checkRemoteEnvironment(httpEnv(served.url), blind),
      /warmstart\.skillBlind .* give env\.prompt/,
    )
    const rendered = httpEnv(served.url, { prompt: { instruction: 'Push the box X onto O.', historyLength: 1 } })
    assert.equal((await checkRemoteEnvironment(rendered, blind)).kind, 'http')
  })
})
