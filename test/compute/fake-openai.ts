// An OpenAI-compatible chat completions server on 127.0.0.1 whose every answer a test chooses: a reply, an HTTP
// error with headers, a body that is not JSON, a hang, or the answer of an upstream server (the fault-injecting
// proxy of the integration tier sits in front of llama.cpp's server this way). It records what it was sent.
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface SeenRequest {
  /** 0-based, in arrival order. */
  n: number
  path: string
  authorization: string | undefined
  body: Record<string, unknown>
}

export type FakeAnswer =
  | { reply: string; finishReason?: string }
  | { status: number; headers?: Record<string, string>; body?: string }
  /** Never answers (the client's timeout must fire). */
  | { hang: true }
  /** Forwards the request to the upstream server and passes its answer on. */
  | { forward: true }
  /** Forwards, then replaces the reply's content (a garbage reply in a well-formed completion). */
  | { forward: true; content: string }

export interface FakeOpenAIServer {
  baseUrl: string
  seen: SeenRequest[]
  close(): Promise<void>
}

export function completion(content: string, finishReason = 'stop', model = 'fake'): Record<string, unknown> {
  return {
    id: 'chatcmpl-fake',
    object: 'chat.completion',
    created: 0,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: finishReason }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  }
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

/**
 * Starts the server; `answer` decides each chat completion request (GET /v1/models always answers). `upstream`
 * (a base URL ending in /v1) is where `forward` answers come from.
 */
export async function startFakeOpenAI(
  answer: (request: SeenRequest) => FakeAnswer | Promise<FakeAnswer>,
  options: { upstream?: string } = {},
): Promise<FakeOpenAIServer> {
  const seen: SeenRequest[] = []
  const hanging = new Set<() => void>()
  const server = createServer(async (req, res) => {
    const text = await readBody(req)
    if (req.method === 'GET' && req.url?.endsWith('/models')) {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'fake', object: 'model' }] }))
      return
    }
    let body: Record<string, unknown> = {}
    try {
      body = JSON.parse(text) as Record<string, unknown>
    } catch {}
    const request: SeenRequest = { n: seen.length, path: req.url ?? '', authorization: req.headers.authorization, body }
    seen.push(request)
    const a = await answer(request)
    if ('hang' in a) {
      hanging.add(() => res.destroy())
      return
    }
    if ('forward' in a) {
      const headers: Record<string, string> = { 'content-type': 'application/json' }
      if (req.headers.authorization) headers.authorization = req.headers.authorization
      const upstream = await fetch(`${options.upstream}${(req.url ?? '').replace(/^\/v1/, '')}`, {
        method: req.method ?? 'POST',
        headers,
        body: text,
      })
      let out = await upstream.text()
      if ('content' in a && upstream.ok) {
        const parsed = JSON.parse(out) as { choices: Array<{ message: { content: string } }> }
        for (const c of parsed.choices) c.message.content = a.content
        out = JSON.stringify(parsed)
      }
      res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' })
      res.end(out)
      return
    }
    if ('reply' in a) {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify(completion(a.reply, a.finishReason)))
      return
    }
    res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers })
    res.end(a.body ?? JSON.stringify({ error: { message: `injected ${a.status}`, type: 'server_error' } }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    seen,
    async close() {
      for (const end of hanging) end()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
