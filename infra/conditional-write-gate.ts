// versitygw 1.7.0 evaluates If-None-Match / If-Match on PUT before it writes, without a lock: concurrent
// create-if-absent PUTs on one key can all succeed (our conformance suite saw 2 to 4 winners out of 20). This
// gate sits in front of it on 127.0.0.1 and serializes conditional PUTs per object, which makes the
// precondition check and the write one step. Everything else passes straight through; the Host header is kept,
// so SigV4 signatures still verify.
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface Gate {
  endpoint: string
  close(): Promise<void>
}

export async function startConditionalWriteGate(target: { host: string; port: number }, port = 0): Promise<Gate> {
  const tails = new Map<string, Promise<void>>()

  const forward = (req: IncomingMessage, res: ServerResponse): Promise<void> =>
    new Promise((done) => {
      const upstream = request(
        { host: target.host, port: target.port, method: req.method, path: req.url, headers: req.headers },
        (reply) => {
          res.writeHead(reply.statusCode ?? 502, reply.headers)
          reply.pipe(res)
          reply.on('end', done)
          reply.on('error', () => done())
        },
      )
      upstream.on('error', (error) => {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' })
        res.end(`S3 server at ${target.host}:${target.port} unreachable: ${error.message}`)
        done()
      })
      req.pipe(upstream)
    })

  const server: Server = createServer((req, res) => {
    const conditional =
      req.method === 'PUT' && (req.headers['if-none-match'] !== undefined || req.headers['if-match'] !== undefined)
    if (!conditional) {
      void forward(req, res)
      return
    }
    const key = (req.url ?? '').split('?')[0] as string
    const previous = tails.get(key) ?? Promise.resolve()
    const mine = previous.then(() => forward(req, res))
    tails.set(key, mine)
    void mine.finally(() => {
      if (tails.get(key) === mine) tails.delete(key)
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host: '127.0.0.1', port }, resolve)
  })
  const address = server.address() as AddressInfo
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
