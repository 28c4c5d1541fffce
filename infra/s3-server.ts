import { mkdir } from 'node:fs/promises'
import { S3ArtifactStore, type S3StoreOptions } from '../store/s3-store.ts'
import { startConditionalWriteGate } from './conditional-write-gate.ts'
import { freePort } from './ports.ts'
import { startProcess, waitUntilReady } from './processes.ts'

/** Fixed credentials of the local S3 server; it listens on 127.0.0.1 only. */
export const LOCAL_S3_CREDENTIALS = { accessKeyId: 'seedflow-local', secretAccessKey: 'seedflow-local-secret' }
export const LOCAL_S3_REGION = 'us-east-1'

export interface S3ServerOptions {
  binary: string
  stateDir: string
  /** Folder holding the buckets (one subfolder per bucket). */
  dataDir: string
  bucket: string
  port?: number
  detached: boolean
  readyTimeoutMs?: number
}

export interface S3Server {
  endpoint: string
  bucket: string
  pid: number
  logFile: string
  /** Options for an S3ArtifactStore on this server (prefix '' = bucket root). */
  storeOptions(prefix?: string): S3StoreOptions
  stop(): Promise<void>
}

export const S3_NAME = 's3'

/**
 * Starts versitygw over a POSIX folder behind a conditional-write gate (see conditional-write-gate.ts) and
 * creates the bucket. The gate runs in this process: the server is usable while this process lives.
 */
export async function startS3Server(options: S3ServerOptions): Promise<S3Server> {
  const port = await freePort() // versitygw itself; clients talk to the gate
  const gate = await startConditionalWriteGate({ host: '127.0.0.1', port }, options.port ?? 0)
  const endpoint = gate.endpoint
  await mkdir(options.dataDir, { recursive: true })
  const proc = await startProcess({
    name: S3_NAME,
    command: options.binary,
    args: ['--port', `127.0.0.1:${port}`, '--quiet', 'posix', options.dataDir],
    env: {
      ...process.env,
      ROOT_ACCESS_KEY: LOCAL_S3_CREDENTIALS.accessKeyId,
      ROOT_SECRET_KEY: LOCAL_S3_CREDENTIALS.secretAccessKey,
    },
    stateDir: options.stateDir,
    detached: options.detached,
    info: { endpoint, server: `http://127.0.0.1:${port}`, bucket: options.bucket, dataDir: options.dataDir },
  })
  const stop = async () => {
    await gate.close()
    await proc.stop()
  }
  const storeOptions = (prefix = ''): S3StoreOptions => ({
    bucket: options.bucket,
    prefix,
    endpoint,
    region: LOCAL_S3_REGION,
    credentials: LOCAL_S3_CREDENTIALS,
  })
  try {
    // Any HTTP answer (403 for an anonymous request) means the gateway is serving.
    await waitUntilReady(
      proc,
      `S3 server at ${endpoint}`,
      async () => (await fetch(`http://127.0.0.1:${port}`)).status > 0, // versitygw itself, not the gate
      options.readyTimeoutMs ?? 30_000,
    )
    const store = new S3ArtifactStore(storeOptions())
    await store.createBucketIfMissing()
    store.destroy()
  } catch (error) {
    await stop()
    throw error
  }
  return {
    endpoint,
    bucket: options.bucket,
    pid: proc.record.pid,
    logFile: proc.logFile,
    storeOptions,
    stop,
  }
}
