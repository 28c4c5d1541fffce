// What third-party OpenAI clients expect of `seedflow serve` (issue 40, item 12), each case through the official
// `openai` client: a list `prompt`, log-prob `bytes` that rebuild an emoji, max_tokens 16 by default on
// completions, a 400 naming each sampling field the server does not implement, the field a too-long prompt is
// blamed on, CORS (off by default), and the access log (never the key, the query string or the body).
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import OpenAI, { APIError } from 'openai'
import { accessLogLine, corsOrigins } from '../../cli/serve-command.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { TextTokenizer } from '../../policy/tokenizer.ts'
import { type AccessLogEntry, type Serving, serveCheckpoint } from '../../serve/index.ts'
import type { DecodeStepper } from '../../serve/scheduler.ts'
import { servedCheckpoint } from './served-checkpoint.ts'

const MODEL = 'tiny-chat'
const CHECKPOINT = servedCheckpoint({ chat: true })
const TOKENIZER = new TextTokenizer(CHECKPOINT.tokenizerJson as object, CHECKPOINT.tokenizerConfig, [0])
const ask = [{ role: 'user' as const, content: 'hello world' }]

function clientOf(serving: Serving, apiKey = 'unused'): OpenAI {
  return new OpenAI({ baseURL: `${serving.url}/v1`, apiKey, maxRetries: 0 })
}

async function refusal(p: Promise<unknown>): Promise<APIError> {
  try {
    await p
  } catch (error) {
    if (error instanceof APIError) return error
    throw error
  }
  throw new Error('the request succeeded; a 400 was expected')
}

/** The model's logits and log-probs as they are, but each row's tokens replaced by `script`, in order. */
function scripted(script: readonly number[]) {
  const next = new Map<number, number>()
  const swap = <T extends { row: number; token: number }>(t: T): T => {
    const at = next.get(t.row) ?? 0
    next.set(t.row, at + 1)
    return { ...t, token: script[at % script.length] as number }
  }
  return (b: DecodeStepper): DecodeStepper => ({
    get rows() {
      return b.rows
    },
    get capacity() {
      return b.capacity
    },
    get free() {
      return b.free
    },
    admit: async (specs) => {
      const first = await b.admit(specs)
      for (const t of first) next.set(t.row, 0)
      return first.map(swap)
    },
    step: async () => (await b.step()).map(swap),
    release: (row) => b.release(row),
  })
}

describe('seedflow serve for OpenAI clients (item 12)', () => {
  const engine = createLocalEngine({ threads: 1 })
  let serving: Serving
  let client: OpenAI
  before(async () => {
    serving = await serveCheckpoint(engine, CHECKPOINT, { name: MODEL, context: 256, rows: 16 })
    client = clientOf(serving)
  })
  after(async () => {
    await serving.close(1000)
    await engine.close()
  })

  it('answers a prompt list of one string (LangChain sends one) as the same prompt given as a string', async () => {
    const body = { model: MODEL, max_tokens: 6, seed: 4, ignore_eos: true }
    const listed = await client.completions.create({ ...body, prompt: ['hello there'] })
    const plain = await client.completions.create({ ...body, prompt: 'hello there' })
    assert.equal(listed.choices.length, 1)
    assert.equal(listed.choices[0]?.text, plain.choices[0]?.text)
    assert.deepEqual(listed.usage, plain.usage)
  })

  it('serves each prompt of a list as its own n choices, in OpenAI order (prompt i: indexes i·n … i·n + n − 1)', async () => {
    const body = { model: MODEL, max_tokens: 5, temperature: 0, ignore_eos: true }
    const both = await client.completions.create({ ...body, prompt: ['hello', 'the quick brown'], n: 2 })
    const hello = await client.completions.create({ ...body, prompt: 'hello' })
    const quick = await client.completions.create({ ...body, prompt: 'the quick brown' })
    assert.deepEqual(
      both.choices.map((c) => [c.index, c.text]),
      [
        [0, hello.choices[0]?.text],
        [1, hello.choices[0]?.text],
        [2, quick.choices[0]?.text],
        [3, quick.choices[0]?.text],
      ],
    )
    assert.equal(both.usage?.prompt_tokens, (hello.usage?.prompt_tokens ?? 0) + (quick.usage?.prompt_tokens ?? 0))
    assert.equal(both.usage?.completion_tokens, 4 * 5)
  })

  it('serves a list of token-id prompts too', async () => {
    const ids = [TOKENIZER.encode('hello'), TOKENIZER.encode('push the box')]
    const r = await client.completions.create({ model: MODEL, prompt: ids, max_tokens: 3, temperature: 0 })
    assert.deepEqual(
      r.choices.map((c) => c.index),
      [0, 1],
    )
    assert.equal(r.usage?.prompt_tokens, (ids[0]?.length ?? 0) + (ids[1]?.length ?? 0))
  })

  it('refuses a prompt list whose choices exceed the decode batch with a 400 naming prompt', async () => {
    const e = await refusal(
      client.completions.create({ model: MODEL, prompt: Array(9).fill('hello'), n: 2, max_tokens: 1 }),
    )
    assert.equal(e.status, 400)
    assert.equal(e.param, 'prompt')
    assert.match(e.message, /9 prompts × n = 2 make 18 choices, over the 16 rows of the decode batch/)
  })

  it('names the list entry of an empty prompt', async () => {
    const e = await refusal(client.completions.create({ model: MODEL, prompt: ['hello', ''] }))
    assert.equal(e.param, 'prompt.1')
  })

  it('stops a completion without max_tokens after 16 tokens, as OpenAI and vLLM do', async () => {
    const r = await client.completions.create({
      model: MODEL,
      prompt: 'hello',
      ignore_eos: true,
    } as OpenAI.CompletionCreateParamsNonStreaming)
    assert.equal(r.usage?.completion_tokens, 16)
    assert.equal(r.choices[0]?.finish_reason, 'length')
  })

  it('blames a too-long completions prompt on prompt (and a too-long chat on messages)', async () => {
    const ids = await refusal(client.completions.create({ model: MODEL, prompt: Array(300).fill(5) }))
    assert.equal(ids.status, 400)
    assert.equal(ids.param, 'prompt')
    assert.equal(ids.code, 'context_length_exceeded')
    const text = await refusal(client.completions.create({ model: MODEL, prompt: 'hello '.repeat(300) }))
    assert.equal(text.param, 'prompt')
    const chat = await refusal(
      client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hello '.repeat(300) }] }),
    )
    assert.equal(chat.param, 'messages')
  })

  const UNSUPPORTED: [string, unknown][] = [
    ['top_k', 40],
    ['min_p', 0.05],
    ['min_tokens', 4],
    ['repetition_penalty', 1.2],
    ['frequency_penalty', 0.5],
    ['presence_penalty', -0.5],
    ['logit_bias', { '50': 100 }],
    ['response_format', { type: 'json_object' }],
  ]
  for (const [field, value] of UNSUPPORTED)
    it(`refuses ${field} = ${JSON.stringify(value)} with a 400 naming ${field} (chat and completions)`, async () => {
      for (const request of [
        client.chat.completions.create({ model: MODEL, messages: ask, max_tokens: 1, [field]: value }),
        client.completions.create({ model: MODEL, prompt: 'hello', max_tokens: 1, [field]: value }),
      ]) {
        const e = await refusal(request)
        assert.equal(e.status, 400)
        assert.equal(e.param, field)
        assert.match(e.message, new RegExp(`^400 ${field}: not supported by seedflow serve \\(only .* is accepted`))
      }
    })

  it('accepts each of those fields at the value that changes nothing, with the same answer as without it', async () => {
    const neutral = {
      top_k: -1,
      min_p: 0,
      min_tokens: 0,
      repetition_penalty: 1,
      frequency_penalty: 0,
      presence_penalty: 0,
      logit_bias: {},
      response_format: { type: 'text' },
    }
    const body = { model: MODEL, prompt: 'hello', max_tokens: 6, seed: 8, ignore_eos: true }
    const plain = await client.completions.create(body as OpenAI.CompletionCreateParamsNonStreaming)
    const withNeutral = await client.completions.create({
      ...body,
      ...neutral,
    } as OpenAI.CompletionCreateParamsNonStreaming)
    assert.equal(withNeutral.choices[0]?.text, plain.choices[0]?.text)
  })
})

describe('seedflow serve: log-prob bytes of byte-level tokens', () => {
  const engine = createLocalEngine({ threads: 1 })
  const TEXT = 'hi 🙂 ✓!'
  const ids = TOKENIZER.encode(TEXT)
  let serving: Serving
  before(async () => {
    serving = await serveCheckpoint(engine, CHECKPOINT, { name: MODEL, context: 128, wrapBatch: scripted(ids) })
  })
  after(async () => {
    await serving.close(1000)
    await engine.close()
  })

  it('gives each token its real bytes, so that the bytes rebuild the emoji the tokens spell', async () => {
    const lone = ids.map((id) => TOKENIZER.decode([id]))
    assert.ok(
      lone.some((t) => t.includes('\uFFFD')),
      `the emoji spans byte-level tokens: ${JSON.stringify(lone)}`,
    )
    const r = await clientOf(serving).chat.completions.create({
      model: MODEL,
      messages: ask,
      max_tokens: ids.length,
      ignore_eos: true,
      logprobs: true,
      top_logprobs: 2,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming)
    const content = r.choices[0]?.logprobs?.content ?? []
    assert.equal(r.choices[0]?.message.content, TEXT)
    assert.equal(content.length, ids.length)
    const bytes = Buffer.concat(content.map((e) => Buffer.from(e.bytes ?? [])))
    assert.equal(new TextDecoder('utf-8', { fatal: true }).decode(bytes), TEXT)
    // a whole-character alternative's bytes are its text's UTF-8
    for (const top of content.flatMap((e) => e.top_logprobs))
      if (!top.token.includes('\uFFFD')) assert.deepEqual(top.bytes, [...Buffer.from(top.token, 'utf8')])
  })
})

describe('seedflow serve: CORS and the access log', () => {
  const engine = createLocalEngine({ threads: 1 })
  after(() => engine.close())
  const ORIGIN = 'http://localhost:5173'
  const preflight = (url: string, origin = ORIGIN) =>
    fetch(`${url}/v1/chat/completions`, {
      method: 'OPTIONS',
      headers: {
        Origin: origin,
        'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'authorization,content-type',
      },
    })

  it('sends no CORS headers by default, and a preflight is not allowed', async () => {
    const serving = await serveCheckpoint(engine, CHECKPOINT, { name: MODEL, context: 64 })
    try {
      const pre = await preflight(serving.url)
      assert.equal(pre.status, 405)
      assert.equal(pre.headers.get('access-control-allow-origin'), null)
      const get = await fetch(`${serving.url}/v1/models`, { headers: { Origin: ORIGIN } })
      assert.equal(get.status, 200)
      assert.equal(get.headers.get('access-control-allow-origin'), null)
    } finally {
      await serving.close(1000)
    }
  })

  it('with origins configured, answers their preflight (no key needed) and marks their responses', async () => {
    const serving = await serveCheckpoint(engine, CHECKPOINT, {
      name: MODEL,
      context: 64,
      corsOrigins: [ORIGIN],
      apiKey: 'sk-cors',
    })
    try {
      const pre = await preflight(serving.url)
      assert.equal(pre.status, 204)
      assert.equal(pre.headers.get('access-control-allow-origin'), ORIGIN)
      assert.match(pre.headers.get('access-control-allow-methods') ?? '', /POST/)
      assert.match(pre.headers.get('access-control-allow-headers') ?? '', /authorization/)
      const post = await fetch(`${serving.url}/v1/completions`, {
        method: 'POST',
        headers: { Origin: ORIGIN, Authorization: 'Bearer sk-cors', 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: MODEL, prompt: 'hello', max_tokens: 2 }),
      })
      assert.equal(post.status, 200)
      assert.equal(post.headers.get('access-control-allow-origin'), ORIGIN)
      assert.equal(post.headers.get('vary'), 'Origin')
      const other = await preflight(serving.url, 'http://evil.example')
      assert.equal(other.headers.get('access-control-allow-origin'), null)
    } finally {
      await serving.close(1000)
    }
  })

  it('reads --cors as a list of origins and refuses what is not an origin', () => {
    assert.deepEqual(corsOrigins('http://localhost:5173, https://app.example:8443'), [
      'http://localhost:5173',
      'https://app.example:8443',
    ])
    assert.throws(() => corsOrigins('http://app.example/chat'), {
      name: 'RunInputError',
      message:
        '--cors http://app.example/chat: "http://app.example/chat" is not an origin (scheme://host[:port], or * for any)',
    })
  })

  it('with *, allows any origin', async () => {
    const serving = await serveCheckpoint(engine, CHECKPOINT, { name: MODEL, context: 64, corsOrigins: ['*'] })
    try {
      const get = await fetch(`${serving.url}/v1/models`, { headers: { Origin: 'http://anything.example:8080' } })
      assert.equal(get.headers.get('access-control-allow-origin'), '*')
    } finally {
      await serving.close(1000)
    }
  })

  it('logs one entry per request (method, path, status, tokens, time), never the key, the query or the body', async () => {
    const entries: AccessLogEntry[] = []
    const KEY = 'sk-do-not-log-7f3a'
    const serving = await serveCheckpoint(engine, CHECKPOINT, {
      name: MODEL,
      context: 64,
      apiKey: KEY,
      accessLog: (e) => entries.push(e),
    })
    try {
      const client = new OpenAI({
        baseURL: `${serving.url}/v1`,
        apiKey: KEY,
        maxRetries: 0,
        defaultQuery: { token: 'query-secret-91' },
      })
      const r = await client.completions.create({
        model: MODEL,
        prompt: 'zebra body text',
        max_tokens: 3,
        ignore_eos: true,
      } as OpenAI.CompletionCreateParamsNonStreaming)
      await refusal(clientOf(serving, 'sk-wrong').models.list())
      assert.equal(entries.length, 2)
      const [ok, denied] = entries as [AccessLogEntry, AccessLogEntry]
      assert.deepEqual(
        { ...ok, ms: 0 },
        {
          method: 'POST',
          path: '/v1/completions',
          status: 200,
          promptTokens: r.usage?.prompt_tokens,
          completionTokens: 3,
          ms: 0,
        },
      )
      assert.ok(ok.ms > 0)
      assert.deepEqual([denied.method, denied.path, denied.status], ['GET', '/v1/models', 401])
      const lines = entries.map(accessLogLine).join('')
      assert.match(lines, /^seedflow: POST \/v1\/completions 200 prompt_tokens=\d+ completion_tokens=3 [\d.]+ms$/m)
      for (const secret of [KEY, 'sk-wrong', 'query-secret-91', 'zebra', 'token='])
        assert.ok(!lines.includes(secret), `${secret} in the access log:\n${lines}`)
    } finally {
      await serving.close(1000)
    }
  })
})
