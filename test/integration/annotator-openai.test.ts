// Stage 1 annotated by a real OpenAI-compatible server: seedRun through Temporal and S3, the built-in tiny policy
// rolling out and SmolLM2-135M-Instruct (GGUF) writing the skills. Each server of SERVERS runs three cases: served
// directly; behind a fault-injecting proxy (a 429 with Retry-After, a prompt answered only with 500s, garbage
// replies that echo the key back) whose failures are counted while Stage 1 finishes; and behind it again with the
// Stage 1 activity failing after it annotated (its checkpoint write), so that Temporal's retry must reuse the
// stored replies. SmolLM2 writes few parseable skills: the test checks that the counts add up, not their quality.
// Afterwards no log, stored object, manifest or workflow history of the test holds the API key's value.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createWriteStream } from 'node:fs'
import { mkdir, readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { gunzipSync } from 'node:zlib'
import { DefaultLogger } from '@temporalio/worker'
import type { SkillRecord } from '../../compute/index.ts'
import { StoredReplySchema } from '../../compute/openai-annotator.ts'
import { startLlamaServer } from '../../infra/llama-server.ts'
import { importGguf, writeCheckpointFolder } from '../../policy/gguf/gguf-import.ts'
import type { PhaseManifest } from '../../records/phase-manifest.ts'
import { parseSkillLines } from '../../records/skill-library.ts'
import type { ArtifactStore } from '../../store/artifact-store.ts'
import { getJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import { type FakeAnswer, type FakeOpenAIServer, startFakeOpenAI } from '../compute/fake-openai.ts'
import { microConfig } from '../compute/micro.ts'
import { allKeys, type PipelineHarness, startPipeline } from './pipeline-harness.ts'
import { TEST_ENV, testServers } from './servers.ts'

/** A served model the annotator talks to: its API root, the name to ask for, its logs, how to stop it. */
interface ServedModel {
  baseUrl: string
  model: string
  logFiles: string[]
  stop(): Promise<void>
}

/** One OpenAI-compatible server the annotator is tested against, serving the test's GGUF with `apiKey` required. */
interface ServerCase {
  name: string
  start(options: { gguf: string; stateDir: string; apiKey: string }): Promise<ServedModel>
}

/**
 * The servers. seedflow serve is the second (it lands separately): one more entry whose start() serves the GGUF
 * on 127.0.0.1 requiring the key and returns the same fields.
 */
const SERVERS: ServerCase[] = [
  {
    name: "llama.cpp's server (llama-cpp-python)",
    async start({ gguf, stateDir, apiKey }) {
      const python = process.env[TEST_ENV.llamaPython]
      const server = await startLlamaServer({
        model: gguf,
        stateDir,
        apiKey,
        nCtx: 4096,
        threads: 1, // OpenMP's spinning threads crawl on a shared 2-core machine: one is ten times faster there
        ...(python ? { python } : {}),
      })
      return { baseUrl: server.baseUrl, model: server.model, logFiles: [server.logFile], stop: server.stop }
    },
  },
  {
    name: 'seedflow serve',
    async start({ gguf, stateDir, apiKey }) {
      return startSeedflowServe({ gguf, stateDir, apiKey, keyEnv: KEY_ENV })
    },
  },
]

/**
 * `seedflow serve` as a user starts it, on `seedflow import`'s conversion of the GGUF: a free 127.0.0.1 port, the
 * key from an environment variable (never argv), its output in a log file; stopped by PID with SIGTERM.
 */
async function startSeedflowServe(o: { gguf: string; stateDir: string; apiKey: string; keyEnv: string }) {
  await mkdir(o.stateDir, { recursive: true })
  const folder = join(o.stateDir, 'smollm2')
  await writeCheckpointFolder(folder, (await importGguf(o.gguf)).checkpoint)
  const logFile = join(o.stateDir, 'seedflow-serve.log')
  const log = createWriteStream(logFile)
  const bin = fileURLToPath(new URL('../../cli/bin.js', import.meta.url))
  const args = ['serve', folder, '--port', '0', '--served-model-name', 'smollm2', '--api-key-env', o.keyEnv]
  const child = spawn(process.execPath, [bin, ...args, '--context', '2048', '--batch-rows', '4', '--threads', '1'], {
    env: { ...process.env, [o.keyEnv]: o.apiKey },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const baseUrl = await new Promise<string>((resolve, reject) => {
    let out = ''
    const timer = setTimeout(() => reject(new Error(`seedflow serve did not start in 120 s; see ${logFile}`)), 120_000)
    child.stdout.on('data', (d: Buffer) => {
      log.write(d)
      out += d
      const url = /at (http:\/\/127\.0\.0\.1:\d+)\/v1 /.exec(out)?.[1]
      if (url) {
        clearTimeout(timer)
        resolve(`${url}/v1`)
      }
    })
    child.stderr.on('data', (d: Buffer) => log.write(d))
    child.once('exit', (code) => reject(new Error(`seedflow serve exited (${code}) before listening; see ${logFile}`)))
  })
  return {
    baseUrl,
    model: 'smollm2',
    logFiles: [logFile],
    async stop() {
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
      await exited
      clearTimeout(timer)
      log.end()
    },
  }
}

const KEY = `sk-seedflow-${randomBytes(12).toString('hex')}`
const KEY_ENV = 'SEEDFLOW_TEST_ANNOTATOR_KEY'

/** What the worker printed and logged while the test ran (the worker runs in this process). */
const logged: string[] = []
function teeOutput(): () => void {
  const writes = [process.stdout, process.stderr].map((stream) => {
    const write = stream.write.bind(stream)
    stream.write = ((chunk: unknown, ...rest: unknown[]) => {
      logged.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8'))
      return (write as (...a: unknown[]) => boolean)(chunk, ...rest)
    }) as typeof stream.write
    return () => {
      stream.write = write as typeof stream.write
    }
  })
  return () => {
    for (const restore of writes) restore()
  }
}

/** Every text inside a value: strings, and byte arrays (history payloads) decoded as UTF-8. */
function textsOf(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value)
  else if (value instanceof Uint8Array) out.push(Buffer.from(value).toString('utf8'))
  else if (Array.isArray(value)) for (const v of value) textsOf(v, out)
  else if (value && typeof value === 'object') for (const v of Object.values(value)) textsOf(v, out)
  return out
}

async function filesUnder(dir: string, out: string[] = []): Promise<string[]> {
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const path = join(dir, e.name)
    if (e.isDirectory()) await filesUnder(path, out)
    else if (e.isFile()) out.push(path)
  }
  return out
}

/** The bytes as a reader would see them: gzip (the trajectories) opened. */
function opened(bytes: Buffer): Buffer {
  return bytes[0] === 0x1f && bytes[1] === 0x8b ? gunzipSync(bytes) : bytes
}

/** The store with the first write under `prefix` failing (a retryable error: the activity is retried). */
function failFirstWrite(prefix: string) {
  return (store: ArtifactStore): ArtifactStore => {
    let failed = false
    const check = (key: string) => {
      if (!failed && key.startsWith(prefix)) {
        failed = true
        throw new Error(`injected: the first write under ${prefix} fails`)
      }
    }
    return {
      location: store.location,
      async put(key, data) {
        check(key)
        return store.put(key, data)
      },
      async putStream(key, data) {
        check(key)
        return store.putStream(key, data)
      },
      async putIfAbsent(key, data) {
        check(key)
        return store.putIfAbsent(key, data)
      },
      get: (key) => store.get(key),
      getStream: (key) => store.getStream(key),
      head: (key) => store.head(key),
      identity: () => store.identity(),
      list: (p, options) => store.list(p, options),
      delete: (key) => store.delete(key),
    }
  }
}

/** The Stage 1 manifest's annotation statistics. */
const STATS = [
  'trajectories',
  'annotated',
  'unparsed',
  'requestFailures',
  'requests',
  'retries',
  'repliesReused',
] as const

const prompted = (body: Record<string, unknown>) =>
  ((body.messages as Array<{ content?: string }> | undefined)?.[0]?.content ?? '') as string

/**
 * The proxy's faults, by the order in which it first sees a prompt (the annotator sends one at a time): the first
 * gets a 429 with Retry-After before its reply, the second only 500s, the third a garbage reply (echoing the
 * Authorization header it was sent), the rest pass through.
 */
function faultyProxy(upstream: string) {
  const order = new Map<string, number>()
  const failing = new Set<string>()
  const garbled = new Set<string>()
  let throttled = false
  const answer = (r: { body: Record<string, unknown>; authorization: string | undefined }): FakeAnswer => {
    const prompt = prompted(r.body)
    const i = order.get(prompt) ?? order.size
    order.set(prompt, i)
    if (i === 0 && !throttled) {
      throttled = true
      return { status: 429, headers: { 'retry-after': '1' } }
    }
    if (i === 1) {
      failing.add(prompt)
      return { status: 500 }
    }
    if (i === 2) {
      garbled.add(prompt)
      return { forward: true, content: `lol ${r.authorization} }{ not a skill` }
    }
    return { forward: true }
  }
  return { answer, failing, garbled, start: () => startFakeOpenAI(answer, { upstream }) }
}

for (const [index, server] of SERVERS.entries()) {
  const tag = `${index}-${process.pid}` // run ids, store prefix and state folder of this server's cases
  describe(`Stage 1 annotated through ${server.name}`, () => {
    let harness: PipelineHarness
    let served: ServedModel
    let proxy: FakeOpenAIServer
    let faults: ReturnType<typeof faultyProxy>
    let restoreOutput: () => void
    const prefix = `annotator-openai-${tag}`
    const RETRIED = `annot-retried-${tag}`
    const runs: string[] = []

    before(async () => {
      restoreOutput = teeOutput()
      process.env[KEY_ENV] = KEY
      const gguf = process.env[TEST_ENV.model]
      assert.ok(gguf, `${TEST_ENV.model} is not set: run through npm run test:integration`)
      served = await server.start({
        gguf,
        stateDir: join(testServers().stateDir, `annotator-${tag}`),
        apiKey: KEY,
      })
      faults = faultyProxy(served.baseUrl)
      proxy = await faults.start()
      harness = await startPipeline(prefix, {
        workerStore: failFirstWrite(`runs/${RETRIED}/sft/checkpoint/`),
        logger: new DefaultLogger('INFO', (entry) =>
          logged.push(
            `${entry.level} ${entry.message} ${JSON.stringify(entry.meta ?? {}, (_, v) => (typeof v === 'bigint' ? String(v) : v))}`,
          ),
        ),
      })
    })
    after(async () => {
      await harness?.close()
      await proxy?.close()
      await served?.stop()
      delete process.env[KEY_ENV]
      restoreOutput?.()
    })

    /** A micro seed run (no Stage 2 iteration) whose Stage 1 is annotated at `baseUrl`; its annotations and stats. */
    async function stage1Through(runId: string, baseUrl: string) {
      runs.push(runId)
      const c = microConfig('seed')
      const annotator = {
        kind: 'openai',
        baseUrl,
        model: served.model,
        apiKeyEnv: KEY_ENV,
        concurrency: 1,
        timeoutSeconds: 120,
        maxRetries: 2,
        temperature: 0,
        maxTokens: 48,
      }
      const result = await harness.run(runId, {
        ...c,
        // a 135M model with 48 new tokens writes few well-formed skills: this tests the transport and the counts,
        // so any share annotated is accepted (the default, half, would make the run wait for an operator)
        stage1: { ...c.stage1, annotator, minAnnotatedShare: 0 },
        stage2: { ...c.stage2, iterations: 0 },
        evaluation: { ...c.evaluation, tasks: 2 },
      })
      assert.deepEqual(
        result.evaluations.map((e) => e.label),
        ['base', 'stage 1'],
      )
      const manifest = (await getJson(harness.store, keys.stagePhaseManifest(runId, 'sft', 0))) as PhaseManifest
      const key = keys.sftAnnotations(runId)
      const skills = parseSkillLines((await harness.store.get(key)).toString('utf8'), key)
      const stat = (name: string) => {
        const v = manifest.stats[name]
        assert.equal(typeof v, 'number', `sft stats.${name}`)
        return v as number
      }
      const stats = Object.fromEntries(STATS.map((n) => [n, stat(n)])) as Record<(typeof STATS)[number], number>
      assert.equal(stats.trajectories, skills.length)
      assert.equal(stats.annotated + stats.unparsed + stats.requestFailures, stats.trajectories, 'the counts add up')
      assert.equal(stats.annotated, skills.filter((s) => s.ok).length)
      // every answered trajectory's reply is stored under its prompt hash, with who answered it
      for (const s of skills.filter((r) => r.failure?.code !== 'request-failed')) {
        const reply = StoredReplySchema.parse(await getJson(harness.store, keys.sftReply(runId, s.promptHash)))
        assert.equal(reply.raw, s.raw)
        assert.equal(reply.model, served.model)
        assert.equal(reply.host, new URL(baseUrl).host)
        assert.equal(s.source?.model, served.model)
      }
      return { stats, skills }
    }

    it('served directly: every trajectory gets a reply, parsed or counted as unparsed', async () => {
      const { stats, skills } = await stage1Through(`annot-direct-${tag}`, served.baseUrl)
      assert.equal(stats.requestFailures, 0)
      assert.equal(stats.requests, skills.length)
      assert.ok(skills.every((s) => s.raw.length > 0))
    })

    it('behind a faulty proxy: the failures are counted and Stage 1 still finishes', async () => {
      const { stats, skills } = await stage1Through(`annot-faulty-${tag}`, proxy.baseUrl)
      assert.ok(faults.failing.size === 1 && faults.garbled.size === 1, 'the proxy injected its faults')
      assert.ok(
        proxy.seen.every((r) => r.authorization === `Bearer ${KEY}`),
        'the key went out with every request (and only there)',
      )
      const failed = (s: SkillRecord) => s.failure?.code === 'request-failed'
      for (const s of skills) {
        assert.equal(failed(s), faults.failing.has(s.prompt), `trajectory ${s.trajectory}: request failure`)
        if (faults.garbled.has(s.prompt)) {
          assert.equal(s.ok, false)
          assert.match(s.raw, /Bearer \[redacted\]/)
        }
      }
      const failedCount = skills.filter(failed).length
      assert.equal(stats.requestFailures, failedCount)
      assert.ok(stats.retries >= 1 + 2 * failedCount, `${stats.retries} retries: the 429, and 2 per failed trajectory`)
      assert.ok(stats.unparsed >= skills.filter((s) => faults.garbled.has(s.prompt)).length)
    })

    it('a Stage 1 attempt that failed after annotating: its retry asks only for what it did not get', async () => {
      const before = proxy.seen.length
      const { stats, skills } = await stage1Through(RETRIED, proxy.baseUrl)
      const failing = skills.filter((s) => faults.failing.has(s.prompt)).length
      const answered = skills.length - failing
      assert.equal(stats.repliesReused, answered, 'the retry read back every reply the failed attempt received')
      assert.equal(stats.requests, 3 * failing, 'and asked again only for the failed trajectory (3 tries each)')
      assert.equal(proxy.seen.length - before, answered + 2 * 3 * failing, 'the proxy saw both attempts')
    })

    it('no log, stored object, manifest or workflow history holds the key', async () => {
      assert.ok(runs.length === 3, 'every run ran')
      const found: string[] = []
      const stored = await allKeys(harness.store, '')
      assert.ok(stored.some((k) => k.includes('/sft/replies/')) && stored.some((k) => k.endsWith('run.json')))
      for (const key of stored) {
        if (opened(await harness.store.get(key)).includes(KEY)) found.push(`s3 ${key}`)
      }
      for (const file of [...(await filesUnder(testServers().stateDir)), ...served.logFiles]) {
        if (opened(await readFile(file)).includes(KEY)) found.push(`file ${file}`)
      }
      const workflows = new Set(runs)
      for (const runId of runs) {
        for await (const w of harness.client.workflow.list({ query: `WorkflowId STARTS_WITH "${runId}"` }))
          workflows.add(w.workflowId)
      }
      for (const id of workflows) {
        const history = await harness.client.workflow.getHandle(id).fetchHistory()
        assert.ok((history.events?.length ?? 0) > 0, `${id} has a history`)
        if (textsOf(history).some((t) => t.includes(KEY))) found.push(`history ${id}`)
      }
      if (logged.some((l) => l.includes(KEY))) found.push('the worker output')
      assert.deepEqual(found, [])
      assert.ok(logged.length > 0, 'the worker output was captured')
    })
  })
}
