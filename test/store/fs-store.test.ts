import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { describeStoreConformance } from './store.case.ts'

const run = promisify(execFile)

describeStoreConformance('filesystem', async () => {
  const parent = await mkdtemp(join(tmpdir(), 'seedflow-fs-store-'))
  const root = join(parent, 'store')
  const store = new FsArtifactStore(root)
  let made = 0
  return {
    store,
    // Rewrites the bytes in place (same inode), as bit rot or a stray editor would.
    corrupt: async (key) => writeFile(join(root, key), 'tampered', { flag: 'r+' }),
    cleanup: () => rm(parent, { recursive: true, force: true }),
    fresh: async (count) => {
      const folder = join(parent, `fresh-${made++}`)
      return Array.from({ length: count }, () => new FsArtifactStore(folder))
    },
    reachedAnotherWay: async () => {
      const copy = join(parent, `copy-${made++}`)
      await run('cp', ['-a', root, copy])
      return new FsArtifactStore(copy)
    },
  }
})
