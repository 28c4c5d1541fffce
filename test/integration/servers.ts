import { join } from 'node:path'
import { LOCAL_S3_CREDENTIALS, LOCAL_S3_REGION, type S3Server, startS3Server } from '../../infra/s3-server.ts'
import { toolPaths } from '../../infra/tools.ts'
import { S3ArtifactStore } from '../../store/s3-store.ts'

/** Environment variables through which test/run.ts hands its servers to the integration tier. */
export const TEST_ENV = {
  temporalAddress: 'SEEDFLOW_TEST_TEMPORAL_ADDRESS',
  s3Endpoint: 'SEEDFLOW_TEST_S3_ENDPOINT',
  s3Bucket: 'SEEDFLOW_TEST_S3_BUCKET',
  stateDir: 'SEEDFLOW_TEST_STATE_DIR',
  serverPids: 'SEEDFLOW_TEST_SERVER_PIDS',
  /** The fetched SmolLM2-135M-Instruct GGUF (infra/install-models.sh). */
  model: 'SEEDFLOW_TEST_MODEL',
  /** The python of llama.cpp's server venv (infra/install-llama-server.sh). */
  llamaPython: 'SEEDFLOW_TEST_LLAMA_PYTHON',
  /** A Chromium binary for the browser tests (infra/install-chromium.sh). */
  chromium: 'SEEDFLOW_TEST_CHROMIUM',
  /** The folder of the PyPI wheel's ORT library and CUDA provider (infra/install-cuda.sh). */
  ortGpu: 'SEEDFLOW_TEST_ORT_GPU',
  /** Lavapipe's Vulkan ICD file, for the WebGPU provider without a GPU (infra/install-vulkan.sh). */
  vulkanIcd: 'SEEDFLOW_TEST_VULKAN_ICD',
} as const

function required(name: string): string {
  const value = process.env[name]
  if (!value)
    throw new Error(`${name} is not set: run the integration tier through 'npm test' or 'npm run test:integration'`)
  return value
}

export function testServers() {
  return {
    temporalAddress: required(TEST_ENV.temporalAddress),
    s3Endpoint: required(TEST_ENV.s3Endpoint),
    s3Bucket: required(TEST_ENV.s3Bucket),
    stateDir: required(TEST_ENV.stateDir),
    serverPids: required(TEST_ENV.serverPids).split(',').map(Number),
  }
}

/** A store on the test S3 server under its own prefix, so test files never see each other's keys. */
export function testS3Store(prefix: string): S3ArtifactStore {
  const { s3Endpoint, s3Bucket } = testServers()
  return new S3ArtifactStore({
    bucket: s3Bucket,
    prefix,
    endpoint: s3Endpoint,
    region: LOCAL_S3_REGION,
    credentials: LOCAL_S3_CREDENTIALS,
  })
}

/**
 * An S3 server of the test's own (versitygw behind its conditional-write gate) under the run's state folder,
 * for tests that stop it; `name` names its folder and its bucket. The caller stops it.
 */
export function startOwnS3Server(name: string): Promise<S3Server> {
  const stateDir = join(testServers().stateDir, name)
  return startS3Server({
    binary: toolPaths().versitygw,
    stateDir,
    dataDir: join(stateDir, 'data'),
    bucket: name,
    detached: false,
  })
}
