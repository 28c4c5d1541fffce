// `seedflow serve` in process on an ephemeral 127.0.0.1 port, answered to the official `openai` client: chat,
// streaming, completions, n > 1, log-probs, token ids, stop strings; concurrent clients in one decode batch; the
// error statuses; a client that goes away; metrics; shutdown with requests in flight.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import OpenAI, { APIError } from 'openai'
import { createLocalEngine } from '../../engine/index.ts'
import { mulberry32 } from '../../envs/rng.ts'
import { generate } from '../../policy/generate.ts'
import { TextTokenizer } from '../../policy/tokenizer.ts'
import { policyModel } from '../../policy/trainer.ts'
import { type Serving, serveCheckpoint } from '../../serve/index.ts'
import type { DecodeStepper } from '../../serve/scheduler.ts'
import { CHATML_TEMPLATE, SERVED_CONFIG, servedCheckpoint } from './served-checkpoint.ts'

const MODEL = 'tiny-chat'
const CHECKPOINT = servedCheckpoint({ chat: true })
const TOKENIZER = new TextTokenizer(CHECKPOINT.tokenizerJson as object, CHECKPOINT.tokenizerConfig, [0])

/** Holds every decode step while held, so a test can see the batch mid-request. */
function pacer() {
  let held: Promise<void> | undefined
  let open = () => {}
  return {
    hold() {
      held = new Promise((resolve) => {
        open = resolve
      })
    },
    release() {
      held = undefined
      open()
    },
    wrap: (b: DecodeStepper): DecodeStepper => ({
      get rows() {
        return b.rows
      },
      get capacity() {
        return b.capacity
      },
      get free() {
        return b.free
      },
      admit: (specs) => b.admit(specs),
      step: async () => {
        if (held) await held
        return b.step()
      },
      release: (row) => b.release(row),
    }),
  }
}

async function metricValue(serving: Serving, name: string): Promise<number> {
  const text = await serving.metrics.registry.metrics()
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
  return line ? Number(line.split(' ').pop()) : 0
}

async function until(what: string, check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 5))
  }
}

function clientOf(serving: Serving): OpenAI {
  return new OpenAI({ baseURL: `${serving.url}/v1`, apiKey: 'unused', maxRetries: 0 })
}

const ask = [{ role: 'user' as const, content: 'hello world' }]

describe('seedflow serve (in process, openai client)', () => {
  const engine = createLocalEngine({ threads: 1 })
  const pace = pacer()
  let serving: Serving
  let client: OpenAI

  before(async () => {
    serving = await serveCheckpoint(engine, CHECKPOINT, { name: MODEL, context: 256, rows: 16, wrapBatch: pace.wrap })
    client = clientOf(serving)
  })
  after(async () => {
    pace.release()
    await serving.close(1000)
    await engine.close()
  })

  it('listens on 127.0.0.1 by default and lists the one served model', async () => {
    assert.equal(serving.host, '127.0.0.1')
    assert.match(serving.url, /^http:\/\/127\.0\.0\.1:\d+$/)
    const models = await client.models.list()
    assert.deepEqual(
      models.data.map((m) => m.id),
      [MODEL],
    )
  })

  it('answers a chat completion through the chat template, with prompt and completion token ids', async () => {
    const r = (await client.chat.completions.create({
      model: MODEL,
      messages: ask,
      max_tokens: 12,
      seed: 3,
      ignore_eos: true,
      return_token_ids: true,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming)) as OpenAI.ChatCompletion & {
      prompt_token_ids: number[]
      choices: { token_ids: number[] }[]
    }
    const expectedPrompt = TOKENIZER.encode('<|im_start|>user\nhello world<|im_end|>\n<|im_start|>assistant\n')
    assert.deepEqual(r.prompt_token_ids, expectedPrompt)
    const choice = r.choices[0] as (typeof r.choices)[number]
    assert.equal(choice.token_ids.length, 12)
    assert.equal(choice.message.content, TOKENIZER.decode(choice.token_ids, { skipSpecial: true }))
    assert.equal(choice.finish_reason, 'length')
    assert.deepEqual(r.usage, {
      prompt_tokens: expectedPrompt.length,
      completion_tokens: 12,
      total_tokens: expectedPrompt.length + 12,
    })
    assert.ok(CHATML_TEMPLATE.includes('<|im_start|>'))
  })

  it('streams a chat completion as server-sent chunks that add up to the same answer', async () => {
    const body = { model: MODEL, messages: ask, max_tokens: 16, seed: 9, ignore_eos: true, return_token_ids: true }
    const whole = (await client.chat.completions.create(
      body as OpenAI.ChatCompletionCreateParamsNonStreaming,
    )) as OpenAI.ChatCompletion & { choices: { token_ids: number[] }[] }
    const stream = await client.chat.completions.create({
      ...body,
      stream: true,
      stream_options: { include_usage: true },
    } as OpenAI.ChatCompletionCreateParamsStreaming)
    let text = ''
    const ids: number[] = []
    let role: string | undefined
    let finish: string | null = null
    let usage: OpenAI.CompletionUsage | undefined
    let chunks = 0
    for await (const chunk of stream) {
      chunks++
      if (chunk.usage) usage = chunk.usage
      const c = chunk.choices[0] as (OpenAI.ChatCompletionChunk.Choice & { token_ids?: number[] }) | undefined
      if (!c) continue
      role ??= c.delta.role ?? undefined
      text += c.delta.content ?? ''
      ids.push(...(c.token_ids ?? []))
      finish = c.finish_reason ?? finish
    }
    assert.equal(role, 'assistant')
    assert.ok(chunks > 3, `${chunks} chunks`)
    assert.equal(text, whole.choices[0]?.message.content)
    assert.deepEqual(ids, whole.choices[0]?.token_ids)
    assert.equal(finish, 'length')
    assert.equal(usage?.completion_tokens, 16)
  })

  it('answers a completion of token ids, its text the decoding of its token ids', async () => {
    const prompt = TOKENIZER.encode('the quick brown fox')
    const r = (await client.completions.create({
      model: MODEL,
      prompt,
      max_tokens: 10,
      temperature: 0.7,
      seed: 1,
      ignore_eos: true,
      return_token_ids: true,
    } as OpenAI.CompletionCreateParamsNonStreaming)) as OpenAI.Completion & {
      prompt_token_ids: number[]
      choices: { token_ids: number[] }[]
    }
    assert.deepEqual(r.prompt_token_ids, prompt)
    assert.equal(r.choices[0]?.token_ids.length, 10)
    assert.equal(r.choices[0]?.text, TOKENIZER.decode(r.choices[0]?.token_ids as number[], { skipSpecial: true }))
  })

  it('samples n > 1 choices as n rows, each from its own stream: the same seed gives the same choices', async () => {
    const body = {
      model: MODEL,
      prompt: 'hello',
      max_tokens: 8,
      n: 3,
      seed: 42,
      ignore_eos: true,
      return_token_ids: true,
    }
    type WithIds = OpenAI.Completion
    const a = (await client.completions.create(body as OpenAI.CompletionCreateParamsNonStreaming)) as WithIds
    const b = (await client.completions.create(body as OpenAI.CompletionCreateParamsNonStreaming)) as WithIds
    assert.deepEqual(
      a.choices.map((c) => c.index),
      [0, 1, 2],
    )
    const ids = (r: WithIds) => (r.choices as unknown as { token_ids: number[] }[]).map((c) => c.token_ids)
    assert.deepEqual(ids(a), ids(b))
    assert.equal(new Set(ids(a).map((t) => t.join(','))).size, 3, 'three different samples')
  })

  it('returns log-probs with the top alternatives (chat and completions)', async () => {
    const chat = await client.chat.completions.create({
      model: MODEL,
      messages: ask,
      max_tokens: 6,
      logprobs: true,
      top_logprobs: 3,
      seed: 5,
      ignore_eos: true,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming)
    const content = chat.choices[0]?.logprobs?.content ?? []
    assert.equal(content.length, 6)
    for (const entry of content) {
      assert.equal(entry.top_logprobs.length, 3)
      const tops = entry.top_logprobs.map((t) => t.logprob)
      assert.deepEqual(
        tops,
        [...tops].sort((x, y) => y - x),
      )
      assert.ok(entry.logprob <= 0 && entry.logprob <= (tops[0] as number) + 1e-6)
    }
    const greedy = await client.chat.completions.create({
      model: MODEL,
      messages: ask,
      max_tokens: 4,
      temperature: 0,
      logprobs: true,
      top_logprobs: 1,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming)
    for (const entry of greedy.choices[0]?.logprobs?.content ?? [])
      assert.equal(entry.logprob, entry.top_logprobs[0]?.logprob, 'greedy picks the most likely token')
    const completion = await client.completions.create({
      model: MODEL,
      prompt: 'hello',
      max_tokens: 5,
      logprobs: 2,
      seed: 2,
      ignore_eos: true,
    } as OpenAI.CompletionCreateParamsNonStreaming)
    const lp = completion.choices[0]?.logprobs
    assert.equal(lp?.tokens?.length, 5)
    assert.equal(lp?.token_logprobs?.length, 5)
    assert.equal(lp?.top_logprobs?.length, 5)
    assert.equal(lp?.text_offset?.[0], 0)
  })

  it('ends a choice before its first stop string, with finish_reason stop', async () => {
    const body = { model: MODEL, prompt: 'push the box', max_tokens: 40, temperature: 0, ignore_eos: true }
    const free = await client.completions.create(body as OpenAI.CompletionCreateParamsNonStreaming)
    const text = free.choices[0]?.text as string
    const stop = text.slice(6, 8)
    const cut = await client.completions.create({ ...body, stop: [stop] } as OpenAI.CompletionCreateParamsNonStreaming)
    assert.equal(cut.choices[0]?.text, text.slice(0, text.indexOf(stop)))
    assert.equal(cut.choices[0]?.finish_reason, 'stop')
    const streamed = await client.completions.create({
      ...body,
      stop: [stop],
      stream: true,
    } as OpenAI.CompletionCreateParamsStreaming)
    let seen = ''
    for await (const chunk of streamed) seen += chunk.choices[0]?.text ?? ''
    assert.equal(seen, cut.choices[0]?.text)
  })

  it('decodes greedily exactly as generate() does for the same prompt', async () => {
    const prompt = TOKENIZER.encode('hello world, how are you')
    const r = (await client.completions.create({
      model: MODEL,
      prompt,
      max_tokens: 24,
      temperature: 0,
      ignore_eos: true,
      return_token_ids: true,
    } as OpenAI.CompletionCreateParamsNonStreaming)) as OpenAI.Completion & { choices: { token_ids: number[] }[] }
    const model = policyModel(engine, CHECKPOINT.config, CHECKPOINT.weights)
    const { sequences } = await generate(model, [prompt], {
      maxNewTokens: 24,
      temperature: 1,
      greedy: true,
      eosIds: [],
      rngs: [mulberry32(0)],
    })
    await model.release()
    assert.deepEqual(r.choices[0]?.token_ids, sequences[0]?.tokens)
  })

  it('reports the queue, running sequences, tokens/s and time to first token on /metrics', async () => {
    const res = await fetch(`${serving.url}/metrics`)
    assert.equal(res.status, 200)
    const text = await res.text()
    for (const name of [
      'seedflow_serve_queue_length',
      'seedflow_serve_running_sequences',
      'seedflow_serve_tokens_per_second',
      'seedflow_serve_time_to_first_token_seconds_bucket',
      'seedflow_serve_decode_steps_total',
      'seedflow_serve_step_occupancy_bucket',
    ])
      assert.ok(text.includes(name), `${name} missing`)
    assert.ok((await metricValue(serving, 'seedflow_serve_tokens_per_second')) > 0)
  })

  it('answers bad requests with 400 naming the field and the limits, an unknown model with 404', async () => {
    const status = async (p: Promise<unknown>) => {
      try {
        await p
      } catch (error) {
        if (error instanceof APIError) return { status: error.status, message: error.message, param: error.param }
        throw error
      }
      return { status: 200, message: '', param: undefined }
    }
    const hot = await status(client.chat.completions.create({ model: MODEL, messages: ask, temperature: 3 }))
    assert.equal(hot.status, 400)
    assert.equal(hot.param, 'temperature')
    const long = await status(client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 300 }))
    assert.equal(long.status, 400)
    assert.match(long.message, /prompt of 1 tokens \+ max_tokens 300 exceed the context of 256 tokens/)
    const huge = await status(client.completions.create({ model: MODEL, prompt: Array(300).fill(5) }))
    assert.equal(huge.status, 400)
    assert.match(huge.message, /the prompt has 300 tokens; the context is 256 tokens/)
    const many = await status(client.completions.create({ model: MODEL, prompt: 'x', n: 17, max_tokens: 1 }))
    assert.equal(many.status, 400)
    assert.match(many.message, /n = 17 exceeds the 16 rows/)
    const unknown = await status(client.chat.completions.create({ model: 'gpt-4o', messages: ask }))
    assert.equal(unknown.status, 404)
    assert.match(unknown.message, /the model "gpt-4o" does not exist; this server serves "tiny-chat"/)
    const raw = await fetch(`${serving.url}/v1/completions`, { method: 'POST', body: '{"model":' })
    assert.equal(raw.status, 400)
    const body = (await raw.json()) as { error: { message: string; type: string; param: unknown; code: unknown } }
    assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type'])
  })

  it('answers a body over the limit with 413', async () => {
    const res = await fetch(`${serving.url}/v1/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: MODEL, prompt: 'x'.repeat(2 * 1024 * 1024) }),
    })
    assert.equal(res.status, 413)
    assert.match(((await res.json()) as { error: { message: string } }).error.message, /over 1048576 bytes/)
  })

  it('frees the row of a client that goes away mid-stream', async () => {
    const tokens0 = await metricValue(serving, 'seedflow_serve_generated_tokens_total')
    const abort = new AbortController()
    pace.hold()
    const stream = await client.chat.completions.create(
      {
        model: MODEL,
        messages: ask,
        max_tokens: 200,
        ignore_eos: true,
        stream: true,
      } as OpenAI.ChatCompletionCreateParamsStreaming,
      { signal: abort.signal },
    )
    const reading = (async () => {
      try {
        for await (const _ of stream) {
        }
      } catch {}
    })()
    await until('the stream to run', async () => (await metricValue(serving, 'seedflow_serve_running_sequences')) === 1)
    abort.abort()
    await reading
    pace.release()
    await until(
      'its row to be freed',
      async () => (await metricValue(serving, 'seedflow_serve_running_sequences')) === 0,
    )
    const spent = (await metricValue(serving, 'seedflow_serve_generated_tokens_total')) - tokens0
    assert.ok(spent < 20, `${spent} tokens sampled for a client that left after the first`)
  })
})

describe('seedflow serve: a full queue, a model without a chat template, shutdown', () => {
  const engine = createLocalEngine({ threads: 1 })
  after(() => engine.close())

  it('answers 429 with Retry-After once the queue is full', async () => {
    const pace = pacer()
    const serving = await serveCheckpoint(engine, CHECKPOINT, {
      name: MODEL,
      context: 128,
      rows: 1,
      maxQueue: 1,
      wrapBatch: pace.wrap,
    })
    const client = clientOf(serving)
    try {
      pace.hold()
      const body = { model: MODEL, prompt: 'hello', max_tokens: 20, ignore_eos: true }
      const first = client.completions.create(body as OpenAI.CompletionCreateParamsNonStreaming)
      await until(
        'the first request to run',
        async () => (await metricValue(serving, 'seedflow_serve_running_sequences')) === 1,
      )
      const second = client.completions.create(body as OpenAI.CompletionCreateParamsNonStreaming)
      await until('the second to wait', async () => (await metricValue(serving, 'seedflow_serve_queue_length')) === 1)
      const res = await fetch(`${serving.url}/v1/completions`, { method: 'POST', body: JSON.stringify(body) })
      assert.equal(res.status, 429)
      assert.equal(res.headers.get('retry-after'), '1')
      const error = ((await res.json()) as { error: { message: string; code: string } }).error
      assert.equal(error.code, 'queue_full')
      assert.match(error.message, /the queue is full: 1 requests wait for the decode batch \(at most 1\)/)
      pace.release()
      const done = await Promise.all([first, second])
      assert.ok(done.every((r) => r.usage?.completion_tokens === 20))
    } finally {
      pace.release()
      await serving.close(1000)
    }
  })

  it('with an API key, answers /v1 only to requests that send it (401 otherwise); /metrics stays open', async () => {
    const serving = await serveCheckpoint(engine, CHECKPOINT, { name: MODEL, context: 64, apiKey: 'sk-right' })
    try {
      const wrong = new OpenAI({ baseURL: `${serving.url}/v1`, apiKey: 'sk-wrong', maxRetries: 0 })
      await assert.rejects(
        wrong.models.list(),
        (e: unknown) => e instanceof APIError && e.status === 401 && e.code === 'invalid_api_key',
      )
      const none = await fetch(`${serving.url}/v1/models`)
      assert.equal(none.status, 401)
      const right = new OpenAI({ baseURL: `${serving.url}/v1`, apiKey: 'sk-right', maxRetries: 0 })
      assert.equal((await right.models.list()).data[0]?.id, MODEL)
      assert.equal((await fetch(`${serving.url}/metrics`)).status, 200)
    } finally {
      await serving.close(1000)
    }
  })

  it('answers chat with 400 for a model without a chat template, while completions work', async () => {
    const serving = await serveCheckpoint(engine, servedCheckpoint({ chat: false }), { name: 'plain', context: 64 })
    const client = clientOf(serving)
    try {
      await assert.rejects(
        client.chat.completions.create({ model: 'plain', messages: ask }),
        (e: unknown) =>
          e instanceof APIError && e.status === 400 && /has no chat template.*\/v1\/completions/.test(e.message),
      )
      const r = await client.completions.create({ model: 'plain', prompt: 'hello', max_tokens: 3 })
      assert.equal(r.choices.length, 1)
    } finally {
      await serving.close(1000)
    }
  })

  it('on close, fails an in-flight stream past the grace period with an error event, and finishes one within it', async () => {
    const pace = pacer()
    const serving = await serveCheckpoint(engine, CHECKPOINT, { name: MODEL, context: 128, wrapBatch: pace.wrap })
    const client = clientOf(serving)
    pace.hold()
    const stream = await client.completions.create({
      model: MODEL,
      prompt: 'hello',
      max_tokens: 50,
      ignore_eos: true,
      stream: true,
    } as OpenAI.CompletionCreateParamsStreaming)
    const read = (async () => {
      let text = ''
      for await (const chunk of stream) text += chunk.choices[0]?.text ?? ''
      return text
    })()
    await until('the stream to run', async () => (await metricValue(serving, 'seedflow_serve_running_sequences')) === 1)
    const closing = serving.close(50)
    await new Promise((r) => setTimeout(r, 100))
    pace.release()
    await closing
    await assert.rejects(
      read,
      (e: unknown) => e instanceof APIError && /shut down before the request finished/.test(e.message),
    )

    const patientPace = pacer()
    const patient = await serveCheckpoint(engine, CHECKPOINT, {
      name: MODEL,
      context: 128,
      wrapBatch: patientPace.wrap,
    })
    patientPace.hold()
    const finished = clientOf(patient).completions.create({
      model: MODEL,
      prompt: 'hello',
      max_tokens: 30,
      ignore_eos: true,
    } as OpenAI.CompletionCreateParamsNonStreaming)
    await until(
      'the request to run',
      async () => (await metricValue(patient, 'seedflow_serve_running_sequences')) === 1,
    )
    const patientClosing = patient.close(10_000)
    patientPace.release()
    await patientClosing
    assert.equal((await finished).usage?.completion_tokens, 30)
  })
})

describe('seedflow serve: one decode batch for concurrent clients', () => {
  // wide enough that a step costs more than its bookkeeping, as a real model's does
  const config = { ...SERVED_CONFIG, hiddenSize: 256, intermediateSize: 512, numLayers: 4, headDim: 64 }
  const engine = createLocalEngine({ threads: 1 })
  let wide: Serving
  let wideClient: OpenAI
  before(async () => {
    wide = await serveCheckpoint(engine, servedCheckpoint({ chat: true, config }), { name: MODEL, context: 128 })
    wideClient = clientOf(wide)
  })
  after(async () => {
    await wide.close(1000)
    await engine.close()
  })

  // The speed-up itself (tokens/s at 16 clients over 1) is a benchmark figure, not a timed test: bench/serve.ts
  // measures it on SmolLM2 side by side; here it is printed only. The counters prove the sharing.
  it('serves 16 concurrent clients from one decode batch: they share decode steps (tokens/s printed)', async (t) => {
    const N = 96 // long enough that arrivals and prefills weigh little against the shared steps
    const one = (i: number) =>
      wideClient.completions.create({
        model: MODEL,
        prompt: `client ${i}`,
        max_tokens: N,
        seed: i,
        ignore_eos: true,
      } as OpenAI.CompletionCreateParamsNonStreaming)
    await one(99) // warm
    let started = performance.now()
    await one(0)
    const single = N / ((performance.now() - started) / 1000)
    const steps0 = await metricValue(wide, 'seedflow_serve_decode_steps_total')
    const rows0 = await metricValue(wide, 'seedflow_serve_step_rows_total')
    const prefills0 = await metricValue(wide, 'seedflow_serve_prefills_total')
    started = performance.now()
    const all = await Promise.all(Array.from({ length: 16 }, (_, i) => one(i)))
    const sixteen = (16 * N) / ((performance.now() - started) / 1000)
    const steps = (await metricValue(wide, 'seedflow_serve_decode_steps_total')) - steps0
    const rows = (await metricValue(wide, 'seedflow_serve_step_rows_total')) - rows0
    const prefills = (await metricValue(wide, 'seedflow_serve_prefills_total')) - prefills0
    t.diagnostic(
      `${single.toFixed(0)} tokens/s at 1 client, ${sixteen.toFixed(0)} at 16 (${(sixteen / single).toFixed(1)}×); ` +
        `${steps} steps, ${(rows / steps).toFixed(1)} rows per step, ${prefills} prefills`,
    )
    assert.ok(all.every((r) => r.usage?.completion_tokens === N))
    // 16 × N tokens: one from each prefill, the rest from steps; alone that would take 16 × 47 steps
    assert.equal(rows, 16 * (N - 1))
    assert.ok(steps < 2 * N, `${steps} decode steps for 16 clients of ${N} tokens: they did not share steps`)
    assert.ok(rows / steps >= 8, `mean occupancy ${(rows / steps).toFixed(1)} rows per step`)
  })
})
