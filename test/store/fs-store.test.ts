import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { describeStoreConformance } from './store.case.ts'

describeStoreConformance('filesystem', async () => {
  const root = await mkdtemp(join(tmpdir(), 'seedflow-fs-store-'))
  const store = new FsArtifactStore(root)
  return {
    store,
    // Rewrites the bytes in place (same inode), as bit rot or a stray editor would.
    corrupt: async (key) => writeFile(join(root, key), 'tampered', { flag: 'r+' }),
    cleanup: () => rm(root, { recursive: true, force: true }),
  }
})
