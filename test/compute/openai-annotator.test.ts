// Stage 1's external annotator against a fake OpenAI-compatible server on 127.0.0.1: the request it sends, retries
// (Retry-After on 429, backoff on 5xx, timeouts), per-trajectory failures counted, replies stored and reused by
// prompt hash across attempts, and the API key kept out of everything it stores, returns or throws.
import assert from 'node:assert/strict'
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { ApplicationFailure } from '@temporalio/common'
import { annotation } from '../../activities/phases/annotate.ts'
import type { AnnotationRequest } from '../../compute/annotator.ts'
import { annotateStage1, type Policy } from '../../compute/index.ts'
import {
  AnnotatorAuthError,
  AnnotatorConfigError,
  openaiAnnotator,
  type ReplyStore,
  retryAfterMs,
  type StoredReply,
} from '../../compute/openai-annotator.ts'
import type { RolloutTrajectory } from '../../compute/rollout.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { classifyFailure, FATAL_ERRORS, NON_RETRYABLE_TYPES } from '../../records/failures.ts'
import { type OpenAIAnnotatorConfig, parseRunConfig, type RunConfig } from '../../seed/config.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { keys } from '../../store/keys.ts'
import { type FakeAnswer, type FakeOpenAIServer, type SeenRequest, startFakeOpenAI } from './fake-openai.ts'
import { microCheckpoint, microConfig, microPolicy } from './micro.ts'

const KEY = 'sk-test-4f1c9e2a7b3d5e6f'
const ENV = { SEEDFLOW_TEST_ANNOTATOR_KEY: KEY }
const GOOD = '{"episode_summary": "pushed the box", "episode_skill": "Push the box onto the target."}'

function settings(baseUrl: string, over: Partial<OpenAIAnnotatorConfig> = {}): OpenAIAnnotatorConfig {
  return {
    kind: 'openai',
    baseUrl,
    model: 'fake-model',
    apiKeyEnv: 'SEEDFLOW_TEST_ANNOTATOR_KEY',
    concurrency: 2,
    timeoutSeconds: 5,
    maxRetries: 2,
    temperature: 0,
    maxTokens: 64,
    ...over,
  }
}

function requests(...prompts: string[]): AnnotationRequest[] {
  return prompts.map((prompt, id) => ({
    trajectory: { id } as RolloutTrajectory,
    prompt,
    promptHash: `${String(id).padStart(2, '0')}${'ab'.repeat(31)}`,
  }))
}

function mapReplies(): ReplyStore & { saved: Map<string, StoredReply> } {
  const saved = new Map<string, StoredReply>()
  return {
    saved,
    load: async (hash) => saved.get(hash),
    save: async (reply) => {
      saved.set(reply.promptHash, reply)
    },
  }
}

const servers: FakeOpenAIServer[] = []
async function serve(answer: (r: SeenRequest) => FakeAnswer): Promise<FakeOpenAIServer> {
  const server = await startFakeOpenAI(answer)
  servers.push(server)
  return server
}
after(async () => {
  for (const s of servers) await s.close()
})

describe('stage1.annotator kind openai in the run config', () => {
  const base = microConfig()
  const problems = (annotator: Record<string, unknown>) => {
    const parsed = parseRunConfig({ ...base, stage1: { ...base.stage1, annotator } })
    return parsed.ok ? [] : parsed.problems
  }

  it('fills in the reference settings, and needs no key at plan time', () => {
    const parsed = parseRunConfig({
      ...base,
      stage1: { ...base.stage1, annotator: { kind: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'm' } },
    })
    assert.ok(parsed.ok)
    assert.deepEqual(parsed.config.stage1.annotator, {
      kind: 'openai',
      baseUrl: 'http://127.0.0.1:1/v1',
      model: 'm',
      apiKeyEnv: 'OPENAI_API_KEY',
      concurrency: 4,
      timeoutSeconds: 120,
      maxRetries: 5,
      temperature: 0,
      maxTokens: 1024,
    })
  })

  it('refuses credentials in the URL, a URL that is not http(s) and a name that is not a variable', () => {
    assert.deepEqual(problems({ kind: 'openai', baseUrl: 'https://u:secret@example.com/v1', model: 'm' }), [
      'stage1.annotator.baseUrl: no credentials in the URL: name the key in apiKeyEnv',
    ])
    assert.equal(problems({ kind: 'openai', baseUrl: 'ftp://example.com/v1', model: 'm' }).length, 1)
    assert.deepEqual(problems({ kind: 'openai', baseUrl: 'http://x/v1', model: 'm', apiKeyEnv: '1 KEY' }), [
      'stage1.annotator.apiKeyEnv: an environment variable name: letters, digits and _, not starting with a digit',
    ])
  })
})

describe('the OpenAI-compatible annotator', () => {
  it('sends the analyzer prompt as one user message, with the key from the named variable', async () => {
    const server = await serve(() => ({ reply: GOOD }))
    const out = await openaiAnnotator(settings(server.baseUrl), { env: ENV }).annotate(requests('analyze this'))
    assert.deepEqual(out.answers[0], {
      ok: true,
      raw: GOOD,
      source: { model: 'fake-model', host: new URL(server.baseUrl).host, finishReason: 'stop', reused: false },
    })
    const [seen] = server.seen
    assert.equal(seen?.path, '/v1/chat/completions')
    assert.equal(seen?.authorization, `Bearer ${KEY}`)
    assert.deepEqual(seen?.body.messages, [{ role: 'user', content: 'analyze this' }])
    assert.equal(seen?.body.model, 'fake-model')
    assert.equal(seen?.body.temperature, 0)
    assert.equal(seen?.body.max_tokens, 64)
    assert.deepEqual(out.stats, {
      requests: 1,
      retries: 0,
      requestFailures: 0,
      reused: 0,
      promptTokens: 10,
      completionTokens: 5,
    })
  })

  it('waits what Retry-After says after a 429, and counts the retry', async () => {
    const server = await serve((r) => (r.n === 0 ? { status: 429, headers: { 'retry-after': '1' } } : { reply: GOOD }))
    const started = Date.now()
    const out = await openaiAnnotator(settings(server.baseUrl), { env: ENV, retryBaseMs: 1 }).annotate(requests('p'))
    assert.ok(Date.now() - started >= 950, `waited ${Date.now() - started} ms, Retry-After said 1 s`)
    assert.equal(out.answers[0]?.ok, true)
    assert.equal(out.stats.requests, 2)
    assert.equal(out.stats.retries, 1)
    assert.equal(out.stats.requestFailures, 0)
  })

  it('reads Retry-After in seconds, as a date and as retry-after-ms', () => {
    const h = (o: Record<string, string>) => new Headers(o)
    assert.equal(retryAfterMs(h({ 'retry-after': '2' })), 2000)
    assert.equal(retryAfterMs(h({ 'retry-after-ms': '150', 'retry-after': '9' })), 150)
    assert.equal(retryAfterMs(h({ 'retry-after': new Date(10_000).toUTCString() }), 7000), 3000)
    assert.equal(retryAfterMs(h({ 'retry-after': 'soon' })), undefined)
    assert.equal(retryAfterMs(h({})), undefined)
  })

  it('gives up on a trajectory after its retries (5xx), counts it, and answers the others', async () => {
    const server = await serve((r) => {
      const [m] = r.body.messages as Array<{ content: string }>
      return m?.content === 'doomed' ? { status: 500 } : { reply: GOOD }
    })
    const out = await openaiAnnotator(settings(server.baseUrl, { maxRetries: 2 }), {
      env: ENV,
      retryBaseMs: 1,
    }).annotate(requests('doomed', 'fine', 'also fine'))
    assert.equal(out.answers[0]?.ok, false)
    assert.match(out.answers[0]?.ok === false ? out.answers[0].reason : '', /HTTP 500: .*injected 500.*\(3 tries\)/)
    assert.equal(out.answers[1]?.ok, true)
    assert.equal(out.answers[2]?.ok, true)
    assert.equal(out.stats.requests, 5)
    assert.equal(out.stats.retries, 2)
    assert.equal(out.stats.requestFailures, 1)
  })

  it('does not retry a 400, and retries a timeout and a body that is not a completion', async () => {
    const server = await serve((r) => {
      const [m] = r.body.messages as Array<{ content: string }>
      if (m?.content === 'too long') return { status: 400, body: '{"error": {"message": "context overflow"}}' }
      if (m?.content === 'slow') return { hang: true }
      return { status: 200, body: '<html>gateway</html>' }
    })
    const out = await openaiAnnotator(settings(server.baseUrl, { maxRetries: 1, timeoutSeconds: 0.3 }), {
      env: ENV,
      retryBaseMs: 1,
    }).annotate(requests('too long', 'slow', 'html'))
    const reasons = out.answers.map((a) => (a.ok ? '' : a.reason))
    assert.match(reasons[0] ?? '', /HTTP 400: context overflow \(1 try\)/)
    assert.match(reasons[1] ?? '', /timed out after 0.3 s \(2 tries\)/)
    assert.match(reasons[2] ?? '', /\(2 tries\)/)
    assert.equal(out.stats.requestFailures, 3)
    assert.equal(out.stats.requests, 5)
    assert.equal(out.stats.retries, 2)
  })

  it('fails the whole annotation on a refused key, naming the variable and not the key', async () => {
    const server = await serve(() => ({ status: 401, body: `{"error": {"message": "bad key ${KEY}"}}` }))
    await assert.rejects(
      openaiAnnotator(settings(server.baseUrl), { env: ENV }).annotate(requests('a', 'b', 'c')),
      (e: Error) => {
        assert.ok(e instanceof AnnotatorAuthError)
        assert.match(e.message, /SEEDFLOW_TEST_ANNOTATOR_KEY/)
        assert.ok(!e.message.includes(KEY))
        return true
      },
    )
  })

  it('makes a missing variable and a refused key final failures of the activity', () => {
    for (const error of [new AnnotatorConfigError('no variable'), new AnnotatorAuthError('refused')]) {
      const failure = classifyFailure('annotate', error)
      assert.ok(failure instanceof ApplicationFailure && failure.nonRetryable, error.name)
      assert.equal(failure.type, error.name)
      assert.ok(NON_RETRYABLE_TYPES.includes(error.name))
    }
  })

  it('refuses to start without the variable, naming it, before any request', async () => {
    const server = await serve(() => ({ reply: GOOD }))
    for (const env of [{}, { SEEDFLOW_TEST_ANNOTATOR_KEY: '' }]) {
      await assert.rejects(
        openaiAnnotator(settings(server.baseUrl), { env }).annotate(requests('a')),
        (e: Error) => e instanceof AnnotatorConfigError && /SEEDFLOW_TEST_ANNOTATOR_KEY/.test(e.message),
      )
    }
    assert.equal(server.seen.length, 0)
  })

  it('cuts the key out of replies and failure reasons even when a server echoes it', async () => {
    const server = await serve((r) =>
      r.n % 2 === 0
        ? { reply: `you sent ${r.authorization}` }
        : { status: 400, body: `{"error": {"message": "no thanks, ${r.authorization}"}}` },
    )
    const replies = mapReplies()
    const out = await openaiAnnotator(settings(server.baseUrl, { concurrency: 1 }), { env: ENV, replies }).annotate(
      requests('a', 'b'),
    )
    const text = JSON.stringify({ out, saved: [...replies.saved.values()] })
    assert.ok(!text.includes(KEY), text)
    assert.match(text, /Bearer \[redacted\]/)
  })

  it('stores each reply as it arrives and reuses it in a later attempt, unless the settings changed', async () => {
    const server = await serve((r) => ({ reply: `reply ${r.n}` }))
    const replies = mapReplies()
    const batch = requests('one', 'two', 'three')
    const first = await openaiAnnotator(settings(server.baseUrl), { env: ENV, replies }).annotate(batch)
    assert.equal(replies.saved.size, 3)
    const stored = replies.saved.get(batch[1]!.promptHash)!
    assert.equal(stored.model, 'fake-model')
    assert.equal(stored.host, new URL(server.baseUrl).host)
    assert.equal(stored.finishReason, 'stop')
    assert.deepEqual(stored.usage, { promptTokens: 10, completionTokens: 5 })
    assert.equal(stored.tries, 1)
    assert.ok(!Number.isNaN(Date.parse(stored.receivedAt)))

    const progress: number[] = []
    const again = await openaiAnnotator(settings(server.baseUrl), { env: ENV, replies }).annotate(batch, (done) =>
      progress.push(done),
    )
    assert.equal(server.seen.length, 3, 'nothing asked again')
    assert.deepEqual(
      again.answers.map((a) => a.ok && a.raw),
      first.answers.map((a) => a.ok && a.raw),
    )
    assert.equal(again.stats.reused, 3)
    assert.equal(again.stats.requests, 0)
    assert.ok(again.answers.every((a) => a.ok && a.source?.reused))
    assert.deepEqual(progress, [1, 2, 3])

    await openaiAnnotator(settings(server.baseUrl, { maxTokens: 32 }), { env: ENV, replies }).annotate(batch)
    assert.equal(server.seen.length, 6, 'other sampling settings: asked again')
  })
})

describe('Stage 1 with the OpenAI-compatible annotator', () => {
  const engine = createLocalEngine({ threads: 1 })
  let policy: Policy
  let config: RunConfig
  let server: FakeOpenAIServer
  let dir: string
  before(async () => {
    // the micro run's 4 trajectories: one prose-wrapped skill, one garbage reply, one 500 until retries run out
    const byPrompt = new Map<string, number>()
    server = await serve((r) => {
      const [m] = r.body.messages as Array<{ content: string }>
      const content = m?.content ?? ''
      if (!byPrompt.has(content)) byPrompt.set(content, byPrompt.size)
      const i = byPrompt.get(content)!
      if (i === 0) return { reply: `Sure! Here is the analysis:\n${GOOD}\nHope this helps.` }
      if (i === 1) return { reply: 'I cannot analyze this episode.' }
      if (i === 2) return { status: 503, headers: { 'retry-after': '0' } }
      return { reply: GOOD }
    })
    const base = microConfig()
    const parsed = parseRunConfig({
      ...base,
      stage1: {
        ...base.stage1,
        annotator: {
          kind: 'openai',
          baseUrl: server.baseUrl,
          model: 'fake-model',
          apiKeyEnv: 'SEEDFLOW_TEST_ANNOTATOR_KEY',
          concurrency: 1,
          maxRetries: 1,
        },
      },
    })
    assert.ok(parsed.ok, parsed.ok ? '' : parsed.problems.join('; '))
    config = parsed.config
    policy = microPolicy(engine, await microCheckpoint(engine, config))
    dir = await mkdtemp(join(tmpdir(), 'seedflow-annotator-'))
  })
  after(async () => {
    await policy.model.release()
    await engine.close()
    await rm(dir, { recursive: true, force: true })
  })

  it("parses the replies like the policy's, counts the failures, and leaves those trajectories without a skill", async () => {
    const annotated = await annotateStage1(policy, config, { env: ENV })
    const { skills } = annotated
    assert.equal(skills.length, 4)
    const byCode = (code: string) => skills.filter((s) => s.failure?.code === code).length
    assert.equal(skills.filter((s) => s.ok).length, 2)
    assert.equal(byCode('request-failed'), 1)
    assert.equal(byCode('no-json-object'), 1)
    assert.equal(annotated.annotator.requestFailures, 1)
    assert.equal(annotated.annotation.parse.total, 3, 'parse statistics count the replies there are')
    assert.equal(annotated.annotation.parse.failed, 1)
    const wrapped = skills.find((s) => s.raw.startsWith('Sure!'))!
    assert.equal(wrapped.skill, 'Push the box onto the target.')
    assert.equal(wrapped.answer, '{"episode_summary":"pushed the box","episode_skill":"Push the box onto the target."}')
    assert.equal(wrapped.source?.model, 'fake-model')
    const failed = skills.find((s) => s.failure?.code === 'request-failed')!
    assert.equal(failed.raw, '')
    assert.match(failed.failure!.reason, /HTTP 503/)
  })

  it('stops below stage1.minAnnotatedShare with the counts and the annotator named, writing no annotations', async () => {
    process.env.SEEDFLOW_TEST_ANNOTATOR_KEY = KEY
    after(() => {
      delete process.env.SEEDFLOW_TEST_ANNOTATOR_KEY
    })
    const store = new FsArtifactStore(join(dir, 'shortfall'))
    const run = { runId: 'annot-short', configSha256: 'c'.repeat(64) }
    const strict = { ...config, stage1: { ...config.stage1, minAnnotatedShare: 0.75 } }
    await assert.rejects(annotation(store, run, strict, policy, 0), (e: Error) => {
      assert.equal(e.name, 'AnnotationShortfallError')
      assert.equal(FATAL_ERRORS[e.name], 'AnnotationShortfall')
      assert.ok(e.message.includes(`the annotator at ${server.baseUrl} (model fake-model`), e.message)
      assert.match(e.message, /key from SEEDFLOW_TEST_ANNOTATOR_KEY on the worker/)
      assert.match(
        e.message,
        /annotated 2 of 4 Stage 1 trajectories, fewer than stage1\.minAnnotatedShare 0\.75 of them \(1 requests failed after their retries, 1 answers did not parse\)/,
      )
      return true
    })
    assert.equal(await store.head(keys.sftAnnotations(run.runId, 0)), undefined)
    // the default (half) accepts 2 of 4, reusing the replies the first attempt stored
    const asked = server.seen.length
    const accepted = await annotation(store, run, config, policy, 1)
    assert.equal(accepted.stats.annotated, 2)
    assert.equal(accepted.stats.repliesReused, 3)
    assert.equal(server.seen.length - asked, 2, 'only the failed trajectory is asked again')
  })

  it('a retried annotate attempt reuses the stored replies; no stored object holds the key', async () => {
    // the phase reads the key from the worker's own environment
    process.env.SEEDFLOW_TEST_ANNOTATOR_KEY = KEY
    after(() => {
      delete process.env.SEEDFLOW_TEST_ANNOTATOR_KEY
    })
    const store = new FsArtifactStore(dir)
    const run = { runId: 'annot-unit', configSha256: 'c'.repeat(64) }
    const asked = server.seen.length
    const first = await annotation(store, run, config, policy, 0)
    const askedFirst = server.seen.length - asked
    assert.equal(first.stats.trajectories, 4)
    assert.equal(first.stats.annotated + first.stats.unparsed + first.stats.requestFailures, 4)
    assert.equal(first.stats.requestFailures, 1)
    assert.equal(askedFirst, 5, 'three replies, and the failing trajectory twice')
    const stored = first.skills.filter((s) => s.failure?.code !== 'request-failed')
    for (const s of stored) assert.ok(await store.head(keys.sftReply(run.runId, s.promptHash)))

    const second = await annotation(store, run, config, policy, 1)
    assert.equal(second.stats.repliesReused, 3)
    assert.equal(server.seen.length - asked - askedFirst, 2, 'only the failed trajectory is asked again')
    assert.deepEqual(
      second.skills.map((s) => s.raw),
      first.skills.map((s) => s.raw),
    )

    const files: string[] = []
    const walk = async (d: string): Promise<void> => {
      for (const e of await readdir(d, { withFileTypes: true }))
        e.isDirectory() ? await walk(join(d, e.name)) : files.push(join(d, e.name))
    }
    await walk(dir)
    assert.ok(files.some((f) => f.includes('/sft/replies/')))
    for (const f of files) assert.ok(!(await readFile(f)).includes(KEY), `${f} holds the key`)
  })
})
