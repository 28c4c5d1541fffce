// A full disk and a refused folder under the folder store (issue 40, item 9): typed store errors naming the key,
// the folder and the store, with what to do; at the activity boundary a failure no retry fixes, so the run waits
// for an operator at once with that message. The failures are injected through the store's file-system seam (no
// real full disk; a read-only folder does not stop root, whom the tests may run as).
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { after, before, describe, it } from 'node:test'
import { ActivityFailure, ApplicationFailure, RetryState } from '@temporalio/common'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import type { Engine } from '../../engine/index.ts'
import { NON_RETRYABLE_TYPES } from '../../records/failures.ts'
import { StoreFullError, StorePermissionError } from '../../store/errors.ts'
import { FsArtifactStore, type FsStoreIo } from '../../store/fs-store.ts'
import { describeFailure } from '../../workflows/operator.ts'
import { microConfig } from '../compute/micro.ts'

/** A file-system call that fails as the kernel would, with `code` and the path it was given. */
function failing(code: string, message: string) {
  return async (path: unknown) => {
    throw Object.assign(new Error(`${code}: ${message}, open '${String(path)}'`), { code, path: String(path) })
  }
}

const uid = process.getuid?.()
const asUser = uid === undefined ? '' : ` (uid ${uid})`

describe('folder store: a full disk and a refused folder', () => {
  let root: string

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'seedflow-fs-errors-'))
  })
  after(async () => rm(root, { recursive: true, force: true }))

  const storeWith = (io: Partial<FsStoreIo>) => new FsArtifactStore(root, { io })

  it('put on a full disk: StoreFullError naming the key, the folder and the store, and to free space', async () => {
    const store = storeWith({ writeFile: failing('ENOSPC', 'no space left on device') })
    await assert.rejects(store.put('runs/r/run.json', Buffer.from('{}')), (e: unknown) => {
      assert.ok(e instanceof StoreFullError, String(e))
      assert.equal(e.name, 'StoreFullError')
      assert.equal(e.key, 'runs/r/run.json')
      assert.equal(e.folder, join(root, '.seedflow-tmp'))
      assert.equal(e.store, root)
      assert.equal(
        e.message,
        `cannot write runs/r/run.json to the artifact store ${root}: no space left on the device (ENOSPC) in ` +
          `${join(root, '.seedflow-tmp')}; free space on that disk (or move the store, docs/operations.md ` +
          '"Backing up and moving a store"), then retry the run',
      )
      return true
    })
  })

  it('putStream and putIfAbsent over quota: StoreFullError (EDQUOT)', async () => {
    const store = storeWith({
      writeFile: failing('EDQUOT', 'disk quota exceeded'),
      createWriteStream: () => {
        throw Object.assign(new Error('EDQUOT: disk quota exceeded'), { code: 'EDQUOT' })
      },
    })
    for (const write of [
      () => store.putStream('runs/r/iterations/0000/rollouts/0000.jsonl.gz', Readable.from([Buffer.from('x')])),
      () => store.putIfAbsent('runs/r/plan.json', Buffer.from('{}')),
    ]) {
      await assert.rejects(write(), (e: unknown) => {
        assert.ok(e instanceof StoreFullError, String(e))
        assert.match(e.message, /the disk quota is exceeded \(EDQUOT\) in .*; free space or raise the quota/)
        return true
      })
    }
  })

  it('a folder the store may not write: StorePermissionError naming the folder and to fix permissions', async () => {
    const store = storeWith({ mkdir: failing('EACCES', 'permission denied') })
    await assert.rejects(store.put('runs/r/run.json', Buffer.from('{}')), (e: unknown) => {
      assert.ok(e instanceof StorePermissionError, String(e))
      assert.equal(e.name, 'StorePermissionError')
      assert.equal(e.path, join(root, '.seedflow-tmp'))
      assert.equal(
        e.message,
        `cannot write runs/r/run.json in the artifact store ${root}: permission denied (EACCES) at ` +
          `${join(root, '.seedflow-tmp')}; give the user running seedflow${asUser} read and write access to the ` +
          "store's folders (chown or chmod), then retry",
      )
      return true
    })
  })

  it('a read-only file system: StorePermissionError saying so (EROFS)', async () => {
    const store = storeWith({ rename: failing('EROFS', 'read-only file system') })
    await assert.rejects(store.put('a/b.json', Buffer.from('{}')), (e: unknown) => {
      assert.ok(e instanceof StorePermissionError, String(e))
      assert.match(e.message, /the file system is read-only \(EROFS\) at .*; remount it read-write/)
      return true
    })
  })

  it('the identity record on a full disk: StoreFullError too', async () => {
    const store = new FsArtifactStore(join(root, 'fresh'), { io: { writeFile: failing('ENOSPC', 'no space') } })
    await assert.rejects(store.identity(), StoreFullError)
  })

  it('other failures pass through as they are', async () => {
    const odd = Object.assign(new Error('EIO: i/o error'), { code: 'EIO' })
    const store = storeWith({
      writeFile: async () => {
        throw odd
      },
    })
    await assert.rejects(store.put('a/c.json', Buffer.from('{}')), (e: unknown) => e === odd)
  })

  it('at the activity boundary: a non-retryable failure of its type, so the run waits for an operator at once', async () => {
    const store = storeWith({ writeFile: failing('ENOSPC', 'no space left on device') })
    const acts = createPipelineActivities({ store, engine: {} as Engine })
    const error = await acts.planRun({ runId: 'r', config: microConfig('seed') }).then(
      () => assert.fail('planRun succeeded'),
      (e: unknown) => e,
    )
    assert.ok(error instanceof ApplicationFailure, String(error))
    assert.equal(error.type, 'StoreFullError')
    assert.equal(error.nonRetryable, true)
    assert.ok(NON_RETRYABLE_TYPES.includes('StoreFullError') && NON_RETRYABLE_TYPES.includes('StorePermissionError'))
    const failure = new ActivityFailure(
      'Activity task failed',
      'planRun',
      '1',
      RetryState.NON_RETRYABLE_FAILURE,
      'w',
      error,
    )
    const wait = describeFailure(failure, 0, '2026-01-01T00:00:00Z')
    assert.equal(wait.type, 'StoreFullError')
    assert.match(wait.message, new RegExp(`no space left on the device \\(ENOSPC\\) in ${root}/\\.seedflow-tmp`))
  })
})
