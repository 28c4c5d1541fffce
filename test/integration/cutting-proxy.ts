// A loopback TCP proxy in front of a server (the S3 server) that can cut connections: the next K connections
// whose client-to-server bytes contain `match` (an HTTP request line such as `PUT /bucket/key`) are closed on
// both sides after `afterBytes` more bytes have been forwarded from where the match starts.
import { createServer, type Socket, connect as tcpConnect } from 'node:net'

export interface CutPlan {
  /** How many connections to cut. */
  times: number
  /** Bytes forwarded to the server from the start of the match before the cut. */
  afterBytes: number
  /** Only connections carrying this text (latin1) are cut; absent: every connection. */
  match?: string
}

export interface CuttingProxy {
  /** http://127.0.0.1:<port> */
  endpoint: string
  /** Arms (or replaces) the plan. */
  cut(plan: CutPlan): void
  /** Connections cut so far. */
  readonly cuts: number
  close(): Promise<void>
}

export async function startCuttingProxy(target: { host: string; port: number }): Promise<CuttingProxy> {
  let plan: CutPlan | undefined
  let cuts = 0
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const upstream = tcpConnect(target)
    sockets.add(client).add(upstream)
    let left: number | undefined // bytes still forwarded before this connection's cut
    const drop = () => {
      client.destroy()
      upstream.destroy()
    }
    client.on('data', (chunk: Buffer) => {
      if (left === undefined && plan && plan.times > 0) {
        const at = plan.match === undefined ? 0 : chunk.toString('latin1').indexOf(plan.match)
        if (at >= 0) {
          plan.times--
          cuts++
          left = at + plan.afterBytes
        }
      }
      if (left !== undefined) {
        if (chunk.length >= left) {
          upstream.write(chunk.subarray(0, left), drop)
          return
        }
        left -= chunk.length
      }
      upstream.write(chunk)
    })
    upstream.on('data', (chunk: Buffer) => client.write(chunk))
    client.on('end', () => upstream.end())
    upstream.on('end', () => client.end())
    client.on('error', drop)
    upstream.on('error', drop)
    client.on('close', () => sockets.delete(client))
    upstream.on('close', () => sockets.delete(upstream))
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host: '127.0.0.1', port: 0 }, resolve)
  })
  const address = server.address()
  if (typeof address !== 'object' || !address) throw new Error('the proxy has no port')
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    cut(next) {
      plan = { ...next }
    },
    get cuts() {
      return cuts
    },
    close() {
      for (const s of sockets) s.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
