import assert from 'node:assert/strict'
import { join } from 'node:path'
import { test } from 'node:test'
import { startS3Server } from '../../infra/s3-server.ts'
import { toolPaths } from '../../infra/tools.ts'
import { StoreUnavailableError } from '../../store/errors.ts'
import { S3ArtifactStore } from '../../store/s3-store.ts'
import { testServers } from './servers.ts'

test('a stopped S3 server fails fast with an error naming the endpoint', async () => {
  const stateDir = join(testServers().stateDir, 'unreachable')
  const server = await startS3Server({
    binary: toolPaths().versitygw,
    stateDir,
    dataDir: join(stateDir, 'data'),
    bucket: 'gone',
    detached: false,
  })
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
