import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startThread, ThreadError } from '../../engine/thread.ts'

test('a thread answers requests, reports progress and keeps the error name and type', async () => {
  const thread = startThread(new URL('./thread-echo.ts', import.meta.url), {}, 'echo')
  try {
    const progress: unknown[] = []
    assert.equal(await thread.call('echo', { text: 'hi' }, { onProgress: (v) => progress.push(v) }), 'echo hi')
    assert.deepEqual(progress, [{ half: true }])
    await assert.rejects(thread.call('fail', {}), (e: unknown) => {
      assert.ok(e instanceof ThreadError)
      assert.equal(e.name, 'ApplicationFailure')
      assert.equal(e.type, 'InvalidRunConfig')
      assert.equal(e.message, 'bad config: lr -1')
      return true
    })
    await assert.rejects(thread.call('nope', {}), /unknown request nope/)
  } finally {
    await thread.terminate()
  }
})
