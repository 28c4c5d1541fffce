import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describeStoreConformance } from '../store/store.case.ts'
import { testS3Store, testServers } from './servers.ts'

describeStoreConformance('S3 (versitygw)', async () => {
  const { stateDir, s3Bucket } = testServers()
  const prefix = `conformance-${process.pid}`
  const store = testS3Store(prefix)
  return {
    store,
    // versitygw keeps each object as a file with its metadata in xattrs: rewrite the bytes in place, as bit
    // rot would, and the recorded sha256 stays.
    corrupt: (key) => writeFile(join(stateDir, 's3-data', s3Bucket, prefix, key), 'tampered', { flag: 'r+' }),
    cleanup: async () => store.destroy(),
  }
})
