// versitygw 1.7.0 evaluates If-None-Match / If-Match on PUT before it writes, without a lock: concurrent
// create-if-absent PUTs on one key can all succeed (our conformance suite saw 2 to 4 winners out of 20). This
// gate sits in front of it on 127.0.0.1 and serializes conditional PUTs per object, which makes the
// precondition check and the write one step. Everything else passes straight through; the Host header is kept,
// so SigV4 signatures still verify.
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { GATE_UNREACHABLE_HEADER } from '../store/s3-errors.ts'

export interface Gate {
  endpoint: string
  close(): Promise<void>
}

/**
 * The gate's own answer when the S3 server behind it is gone: a 503 with an S3 XML error body (what S3 clients
 * parse and retry) and a header the store reads to report the endpoint as unreachable, as if it had connected
 * to the server directly (store/s3-errors.ts). A HEAD reply has no body, so the header carries the reason.
 */
function answerUnreachable(req: IncomingMessage, res: ServerResponse, reason: string): void {
  const xml = (text: string) => text.replace(/[<>&]/g, (c) => (c === '<' ? '&lt;' : c === '>' ? '&gt;' : '&amp;'))
  const body =
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
    `<Error><Code>ServiceUnavailable</Code><Message>${xml(reason)}</Message><Resource>${xml(req.url ?? '/')}</Resource></Error>`
  res.writeHead(503, {
    'content-type': 'application/xml',
    'content-length': Buffer.byteLength(body),
    connection: 'close',
    [GATE_UNREACHABLE_HEADER]: reason.replace(/[^\x20-\x7e]/g, '?'),
  })
  res.end(req.method === 'HEAD' ? undefined : body)
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
          reply.on('error', () => {
            res.destroy() // the server went away mid-reply: cut the client's connection too, not leave it waiting
            done()
          })
        },
      )
      upstream.on('error', (error) => {
        req.unpipe(upstream)
        req.resume() // read the rest of the request body, so that the client reads the answer
        if (res.headersSent) {
          res.destroy() // a reply cut short: the client sees the connection fail, as without the gate
        } else {
          answerUnreachable(req, res, `S3 server at ${target.host}:${target.port} is unreachable: ${error.message}`)
        }
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
