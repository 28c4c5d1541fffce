import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'

/** Ports this process has handed out: never twice, so that ports picked before any is bound are distinct. */
const handedOut = new Set<number>()

/**
 * The first port of the range the OS takes source ports of outgoing connections from (Linux:
 * /proc/sys/net/ipv4/ip_local_port_range, usually 32768–60999).
 */
function ephemeralStart(): number {
  try {
    const start = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0])
    return Number.isInteger(start) && start > 11_000 ? start : 32_768
  } catch {
    return 32_768
  }
}

function bindable(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer()
    server.unref()
    server.on('error', () => resolve(undefined))
    server.listen({ host: '127.0.0.1', port }, () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : undefined))
    })
  })
}

/**
 * A TCP port that was free on 127.0.0.1 a moment ago, for a server started soon after. Picked below the ephemeral
 * range: a port the OS picks (port 0) is an ephemeral one, which an outgoing connection on this shared machine can
 * take as its source port before the server binds it ("address already in use"); one below the range is taken
 * only by another listener. Never the same port twice in a process.
 */
export async function freePort(): Promise<number> {
  const low = 10_000
  const high = ephemeralStart()
  for (let attempt = 0; attempt < 64; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low))
    if (handedOut.has(port)) continue
    if ((await bindable(port)) === port) {
      handedOut.add(port)
      return port
    }
  }
  for (;;) {
    const port = await bindable(0)
    if (port === undefined) throw new Error('no free port on 127.0.0.1')
    if (!handedOut.has(port)) {
      handedOut.add(port)
      return port
    }
  }
}
