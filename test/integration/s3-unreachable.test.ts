import assert from 'node:assert/strict'
import { test } from 'node:test'
import { StoreUnavailableError } from '../../store/errors.ts'
import { S3ArtifactStore } from '../../store/s3-store.ts'
import { startOwnS3Server } from './servers.ts'

// The first test stops the whole server (the gate too: a direct connection failure). The second stops only the
// S3 server behind the conditional-write gate (issue 16, bug 6): the gate's reply used to reach the store as
// `@aws-sdk XML parse error: unexpected content` (a plain-text 502); it must be the same StoreUnavailableError.

test('a stopped S3 server fails fast with an error naming the endpoint', async () => {
  const server = await startOwnS3Server('gone')
  const store = new S3ArtifactStore(server.storeOptions())
  try {
    await store.put('x/y.txt', Buffer.from('hello'))
    await server.stop()
    const started = Date.now()
    await assert.rejects(store.get('x/y.txt'), (e: unknown) => {
      assert.ok(e instanceof StoreUnavailableError, `expected StoreUnavailableError, got ${e}`)
      assert.ok(e.message.includes(server.endpoint), e.message)
      return true
    })
    const seconds = (Date.now() - started) / 1000
    assert.ok(seconds < 10, `took ${seconds} s`)
  } finally {
    store.destroy()
    await server.stop()
  }
})

test('the S3 server stopped behind the conditional-write gate is StoreUnavailableError too', async () => {
  const server = await startOwnS3Server('gone-behind-gate')
  const store = new S3ArtifactStore(server.storeOptions())
  try {
    await store.put('x/y.txt', Buffer.from('hello'))
    process.kill(server.pid, 'SIGKILL') // versitygw only, which this test started; the gate keeps listening
    await waitForExit(server.pid)
    const started = Date.now()
    for (const [what, op] of [
      ['get', () => store.get('x/y.txt')],
      ['head', () => store.head('x/y.txt')],
      ['put', () => store.put('x/z.txt', Buffer.from('again'))],
      ['list', () => store.list('x/')],
    ] as const) {
      await assert.rejects(op(), (e: unknown) => {
        assert.ok(e instanceof StoreUnavailableError, `${what}: expected StoreUnavailableError, got ${e}`)
        assert.ok(e.message.startsWith(`artifact store unreachable at ${server.endpoint}: S3 server at `), e.message)
        assert.match(e.message, /is unreachable: connect ECONNREFUSED/)
        return true
      })
    }
    const seconds = (Date.now() - started) / 1000
    assert.ok(seconds < 10, `took ${seconds} s`)
  } finally {
    store.destroy()
    await server.stop()
  }
})

async function waitForExit(pid: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      process.kill(pid, 0)
    } catch {
      return
    }
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error(`pid ${pid} did not exit`)
}
