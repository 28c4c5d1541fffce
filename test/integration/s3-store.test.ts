import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { type Gate, startConditionalWriteGate } from '../../infra/conditional-write-gate.ts'
import { LOCAL_S3_CREDENTIALS, LOCAL_S3_REGION } from '../../infra/s3-server.ts'
import { S3ArtifactStore } from '../../store/s3-store.ts'
import { describeStoreConformance } from '../store/store.case.ts'
import { testS3Store, testServers } from './servers.ts'

describeStoreConformance('S3 (versitygw)', async () => {
  const { stateDir, s3Bucket } = testServers()
  const prefix = `conformance-${process.pid}`
  const store = testS3Store(prefix)
  const others: S3ArtifactStore[] = []
  const gates: Gate[] = []
  let made = 0
  return {
    store,
    // versitygw keeps each object as a file with its metadata in xattrs: rewrite the bytes in place, as bit
    // rot would, and the recorded sha256 stays.
    corrupt: (key) => writeFile(join(stateDir, 's3-data', s3Bucket, prefix, key), 'tampered', { flag: 'r+' }),
    cleanup: async () => {
      for (const s of [store, ...others]) s.destroy()
      for (const g of gates) await g.close()
    },
    fresh: async (count) => {
      const fresh = `${prefix}-fresh-${made++}`
      const stores = Array.from({ length: count }, () => testS3Store(fresh))
      others.push(...stores)
      return stores
    },
    // A second endpoint in front of the test server (another gate on its own port): the same bucket and prefix.
    reachedAnotherWay: async () => {
      const { hostname, port } = new URL(testServers().s3Endpoint)
      const gate = await startConditionalWriteGate({ host: hostname, port: Number(port) })
      gates.push(gate)
      const other = new S3ArtifactStore({
        bucket: s3Bucket,
        prefix,
        endpoint: gate.endpoint,
        region: LOCAL_S3_REGION,
        credentials: LOCAL_S3_CREDENTIALS,
      })
      others.push(other)
      return other
    },
  }
})
