// The CLI's Temporal connection on loopback servers that fail on purpose: a retry the SDK scheduled before
// `close` never fires into the closed channel (issue 40 item 8: Ctrl-C while a run waited for an operator ended
// in `Error: Channel has been shut down`, exit 1), a connect to nothing fails naming the address and what to do,
// and the reachability watch notices a server that stopped answering.
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client'
import {
  ClosableRetries,
  CONNECT_TIMEOUT_S,
  connectTemporal,
  TemporalUnreachableError,
  watchReachable,
} from '../../cli/temporal-connection.ts'
import { freePort } from '../../infra/ports.ts'

/** A TCP server that drops every connection at once: each gRPC call fails UNAVAILABLE, which the SDK retries. */
async function droppingServer(): Promise<{ server: Server; address: string }> {
  const server = createServer((socket) => socket.destroy())
  await new Promise<void>((resolve) => server.listen({ host: '127.0.0.1', port: 0 }, resolve))
  const { port } = server.address() as { port: number }
  return { server, address: `127.0.0.1:${port}` }
}

describe('the CLI connection to Temporal', () => {
  let dropping: { server: Server; address: string }
  before(async () => {
    dropping = await droppingServer()
  })
  after(() => dropping.server.close())

  it('close waits for a retry scheduled before it, and schedules none after', async () => {
    const base = defaultGrpcRetryOptions()
    let scheduled: () => void = () => {}
    const retryScheduled = new Promise<void>((resolve) => {
      scheduled = resolve
    })
    let delays = 0
    const retries = new ClosableRetries({
      retryableDecider: base.retryableDecider,
      delayFunction: () => {
        delays++
        scheduled()
        return 100
      },
    })
    const connection = Connection.lazy({
      address: dropping.address,
      interceptors: [makeGrpcRetryInterceptor(retries.options)],
    })
    const call = connection.workflowService.getSystemInfo({}).then(
      () => undefined,
      (error: Error & { code?: number }) => error,
    )
    await retryScheduled
    // with a plain close here, the retry's timer fired 100 ms later into the closed channel: an uncaught
    // `Channel has been shut down`, which fails this test file
    await retries.stop()
    await connection.close()
    const error = await call
    assert.equal(error?.code, 14, `UNAVAILABLE expected, got ${error}`) // the retry's own answer: no more retries
    assert.equal(delays, 1)
  })

  it('a connect to a closed port fails naming the address and the hint within the connect timeout', async () => {
    const address = `127.0.0.1:${await freePort()}`
    const started = performance.now()
    await assert.rejects(
      connectTemporal({ address }, 'start the local server with `seedflow up`'),
      (e: Error) =>
        e instanceof TemporalUnreachableError &&
        e.message.startsWith(`cannot reach Temporal at ${address} within ${CONNECT_TIMEOUT_S} s (`) &&
        e.message.endsWith('): start the local server with `seedflow up`'),
    )
    const seconds = (performance.now() - started) / 1000
    assert.ok(seconds < CONNECT_TIMEOUT_S + 3, `took ${seconds.toFixed(1)} s`)
  })

  it('the reachability watch reports a server that does not answer, naming it', async () => {
    const watch = watchReachable({ address: dropping.address }, { intervalMs: 20, failures: 3 })
    try {
      await assert.rejects(
        watch.lost,
        (e: Error) =>
          e instanceof TemporalUnreachableError &&
          e.message.startsWith(
            `Temporal at ${dropping.address} stopped answering (3 probes 20 ms apart failed; last: `,
          ),
      )
    } finally {
      await watch.stop()
    }
  })
})
