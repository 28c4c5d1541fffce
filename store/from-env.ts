import type { ArtifactStore } from './artifact-store.ts'
import { FsArtifactStore } from './fs-store.ts'
import { type MultipartWatcher, S3ArtifactStore } from './s3-store.ts'

/**
 * The artifact store the environment asks for: S3 when SEEDFLOW_S3_BUCKET is set (with SEEDFLOW_S3_ENDPOINT
 * for S3-compatible servers, SEEDFLOW_S3_PREFIX, AWS_REGION and the AWS SDK's usual credential chain:
 * AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_PROFILE / instance roles), else a folder. `hooks` go to
 * the S3 store (a folder has no multipart uploads).
 */
export function storeFromEnv(
  defaultFolder: string,
  env: NodeJS.ProcessEnv = process.env,
  hooks: { onMultipartUpload?: MultipartWatcher } = {},
): ArtifactStore {
  const bucket = env.SEEDFLOW_S3_BUCKET
  if (!bucket) return new FsArtifactStore(env.SEEDFLOW_ARTIFACTS_DIR ?? defaultFolder)
  return new S3ArtifactStore({
    bucket,
    prefix: env.SEEDFLOW_S3_PREFIX ?? '',
    region: env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? 'us-east-1',
    ...(env.SEEDFLOW_S3_ENDPOINT ? { endpoint: env.SEEDFLOW_S3_ENDPOINT } : {}),
    ...(hooks.onMultipartUpload ? { onMultipartUpload: hooks.onMultipartUpload } : {}),
  })
}
