// `seedflow generate`, `seedflow chat` (stdin a pipe) and `seedflow serve` as a user runs them: the binary on a
// small checkpoint folder, exit codes and messages, and serve's SIGTERM with a request in flight.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import OpenAI, { APIError } from 'openai'
import { TextTokenizer } from '../../policy/tokenizer.ts'
import { servedCheckpoint, writeCheckpointFolder } from '../serve/served-checkpoint.ts'
import { seedflow } from './seedflow-process.ts'

const ENV = { SEEDFLOW_S3_BUCKET: '' }

describe('seedflow generate, chat and serve', () => {
  let dir: string
  let chatFolder: string
  let plainFolder: string
  const checkpoint = servedCheckpoint({ chat: true })
  const tokenizer = new TextTokenizer(checkpoint.tokenizerJson as object, checkpoint.tokenizerConfig, [0])

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'seedflow-decode-'))
    chatFolder = writeCheckpointFolder(join(dir, 'tiny-chat'), checkpoint)
    plainFolder = writeCheckpointFolder(join(dir, 'tiny-plain'), servedCheckpoint({ chat: false }))
  })
  after(() => rmSync(dir, { recursive: true, force: true }))

  it('generate completes a prompt greedily, the same tokens every time', async () => {
    const args = [
      'generate',
      chatFolder,
      '--prompt',
      'the quick brown fox',
      '--max-tokens',
      '10',
      '--json',
      '--threads',
      '1',
    ]
    const a = await seedflow(args, ENV)
    assert.equal(a.code, 0, a.err)
    const out = JSON.parse(a.out) as {
      text: string
      prompt_token_ids: number[]
      token_ids: number[]
      finish_reason: string
    }
    assert.deepEqual(out.prompt_token_ids, tokenizer.encode('the quick brown fox'))
    assert.ok(out.token_ids.length >= 1 && out.token_ids.length <= 10)
    assert.equal(out.text, tokenizer.decode(out.token_ids, { skipSpecial: true }))
    assert.match(a.err, /seedflow: \d+ tokens in [\d.]+ s .* finish: (length|stop)/)
    const b = await seedflow(args, ENV)
    assert.deepEqual((JSON.parse(b.out) as { token_ids: number[] }).token_ids, out.token_ids)
  })

  it('generate refuses a prompt that leaves no room, naming the limits, and an unknown checkpoint', async () => {
    const long = await seedflow(['generate', chatFolder, '--prompt', 'hello', '--max-tokens', '600'], ENV)
    assert.equal(long.code, 1)
    assert.match(long.err, /prompt of \d+ tokens \+ --max-tokens 600 exceed the context of 512 tokens/)
    const missing = await seedflow(['generate', join(dir, 'nowhere'), '--prompt', 'hello'], ENV)
    assert.equal(missing.code, 1)
    assert.match(missing.err, /no checkpoint .*nowhere.*: not a folder, and not a store key ending in checkpoint\//)
  })

  it('chat reads user turns from a pipe, streams each reply and keeps the conversation', async () => {
    const r = await seedflow(
      ['chat', chatFolder, '--max-tokens', '8', '--seed', '1', '--threads', '1'],
      ENV,
      undefined,
      'hello\nhow are you\n',
    )
    assert.equal(r.code, 0, r.err)
    const turns = [...r.err.matchAll(/seedflow: (\d+) tokens \(prompt (\d+)\)/g)].map((m) => ({
      tokens: Number(m[1]),
      prompt: Number(m[2]),
    }))
    assert.equal(turns.length, 2, r.err)
    const [first, second] = turns as [{ tokens: number; prompt: number }, { tokens: number; prompt: number }]
    // the second prompt holds the first exchange: first prompt, the reply, the new user turn
    assert.ok(second.prompt > first.prompt + 5, `prompts of ${first.prompt} and ${second.prompt} tokens`)
  })

  it('chat refuses a checkpoint without a chat template and suggests generate', async () => {
    const r = await seedflow(['chat', plainFolder, '--threads', '1'], ENV, undefined, 'hello\n')
    assert.equal(r.code, 1)
    assert.match(r.err, /has no chat template .* use `seedflow generate <checkpoint> --prompt …`/)
  })

  it('serve listens on 127.0.0.1, answers the openai client, and on SIGTERM ends its in-flight stream cleanly and exits 0', async () => {
    let listening: (value: { url: string; signal: (name: NodeJS.Signals) => void }) => void = () => {}
    const ready = new Promise<{ url: string; signal: (name: NodeJS.Signals) => void }>((resolve) => {
      listening = resolve
    })
    const process = seedflow(
      ['serve', chatFolder, '--port', '0', '--threads', '1', '--grace-period', '0'],
      ENV,
      (line, signal) => {
        const url = / at (http:\/\/\S+)\/v1 /.exec(line)?.[1]
        if (url) listening({ url, signal })
      },
    )
    const { url, signal } = await Promise.race([
      ready,
      process.then((r) => {
        throw new Error(`serve exited ${r.code} before listening:\n${r.err}`)
      }),
    ])
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/)
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 })
    const models = await client.models.list()
    assert.deepEqual(
      models.data.map((m) => m.id),
      ['tiny-chat'],
    )
    const reply = await client.chat.completions.create({
      model: 'tiny-chat',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 5,
    })
    assert.equal(reply.choices.length, 1)
    const stream = await client.completions.create({
      model: 'tiny-chat',
      prompt: 'hello',
      max_tokens: 480,
      ignore_eos: true,
      stream: true,
    } as OpenAI.CompletionCreateParamsStreaming)
    let ending: string
    try {
      let finish: string | null = null
      let sent = false
      for await (const chunk of stream) {
        if (!sent) {
          signal('SIGTERM')
          sent = true
        }
        finish = chunk.choices[0]?.finish_reason ?? finish
      }
      ending = `finished: ${finish}`
    } catch (error) {
      assert.ok(error instanceof APIError, String(error))
      assert.match(error.message, /shut down before the request finished/)
      ending = 'failed cleanly'
    }
    const r = await process
    assert.equal(r.code, 0, r.err)
    assert.match(r.err, /SIGTERM: no new requests/)
    assert.match(r.err, /seedflow: stopped/)
    assert.match(ending, /^(finished: length|failed cleanly)$/)
  })
})
