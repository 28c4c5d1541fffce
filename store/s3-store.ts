import { randomUUID } from 'node:crypto'
import { Readable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  CopyObjectCommand,
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3'
import { Upload } from '@aws-sdk/lib-storage'
import {
  type ArtifactStore,
  type CreateResult,
  type ListEntry,
  type ListOptions,
  type ListPage,
  type ObjectInfo,
  pageSizeOf,
  type StoreIdentity,
} from './artifact-store.ts'
import { IntegrityError, NotFoundError } from './errors.ts'
import { HashingStream, sha256Hex, VerifyingStream } from './hash.ts'
import { IDENTITY_NAME, readOrCreateIdentity, sharedUntilFailure } from './identity.ts'
import { assertValidKey, assertValidPrefix, RESERVED_PREFIX } from './key-check.ts'
import { accessRefusalCode, classifyS3Error, httpStatus } from './s3-errors.ts'

export interface S3StoreOptions {
  bucket: string
  /** Folder inside the bucket; '' for the bucket root. */
  prefix: string
  /** Unset for AWS itself; any S3-compatible server otherwise (path-style addressing is then used). */
  endpoint?: string
  region: string
  credentials?: { accessKeyId: string; secretAccessKey: string }
  /** SDK attempts per request (default 3): the fail-fast bound when the endpoint is down. */
  maxAttempts?: number
  connectionTimeoutMs?: number
  /**
   * Called as each multipart upload starts (objects over 16 MiB and every putStream): a listener it returns sees
   * the upload's progress, `loaded` bytes of `total` (undefined while the length is unknown); `abort` stops the
   * upload. `key` is the object the upload writes, bucket prefix included (for putStream a temporary key).
   * The worker's fault injection (workers/faults.ts) watches uploads through it.
   */
  onMultipartUpload?: MultipartWatcher
}

export type MultipartWatcher = (
  key: string,
  abort: () => unknown,
) => ((progress: { loaded?: number; total?: number }) => void) | undefined

const SHA_META = 'sha256'
/** Objects up to this size go in one PUT; larger ones through lib-storage's multipart upload. */
const SINGLE_PUT_LIMIT = 16 * 1024 * 1024
const PART_SIZE = 8 * 1024 * 1024

/**
 * Artifacts in an S3 bucket. The sha256 travels as object metadata (`x-amz-meta-sha256`), written in the
 * same request as the data, so an object and its hash become visible together. Streams of unknown hash are
 * uploaded to a temporary key while hashing, then copied to their key with the hash (one server-side copy).
 */
export class S3ArtifactStore implements ArtifactStore {
  readonly location: string
  readonly #client: S3Client
  readonly #bucket: string
  readonly #prefix: string
  readonly #endpointName: string
  readonly #accessKeyId: string | undefined
  readonly #onMultipartUpload: MultipartWatcher | undefined
  readonly #identity = sharedUntilFailure(() => this.#readOrCreateIdentity())

  constructor(options: S3StoreOptions) {
    if (options.prefix !== '') assertValidPrefix(options.prefix)
    this.#bucket = options.bucket
    this.#prefix = options.prefix.replace(/\/+$/, '')
    this.#endpointName = options.endpoint ?? `AWS S3 (${options.region})`
    this.location = `s3://${this.#bucket}/${this.#prefix} @ ${this.#endpointName}`
    const config: S3ClientConfig = {
      region: options.region,
      maxAttempts: options.maxAttempts ?? 3,
      // Non-AWS servers mishandle the SDK's default aws-chunked checksum framing (docs/design.md §5.2).
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      requestHandler: { connectionTimeout: options.connectionTimeoutMs ?? 3000, requestTimeout: 120_000 },
    }
    if (options.endpoint !== undefined) {
      config.endpoint = options.endpoint
      config.forcePathStyle = true
    }
    if (options.credentials) config.credentials = options.credentials
    this.#accessKeyId = options.credentials?.accessKeyId
    this.#onMultipartUpload = options.onMultipartUpload
    this.#client = new S3Client(config)
  }

  async put(key: string, data: Uint8Array): Promise<ObjectInfo> {
    assertValidKey(key)
    const info: ObjectInfo = { key, sha256: sha256Hex(data), bytes: data.byteLength }
    if (data.byteLength <= SINGLE_PUT_LIMIT) {
      await this.#putObject(info, data, {})
    } else {
      await this.#multipart(this.#full(key), Readable.from([data]), { [SHA_META]: info.sha256 })
    }
    return info
  }

  async putStream(key: string, data: Readable): Promise<ObjectInfo> {
    assertValidKey(key)
    const tmp = this.#full(`${RESERVED_PREFIX}tmp/${randomUUID()}`)
    const hashing = new HashingStream()
    try {
      await this.#multipart(tmp, data.pipe(hashing), {})
      const info: ObjectInfo = { key, sha256: hashing.digest(), bytes: hashing.bytes }
      await this.#call(`CopyObject ${key}`, () =>
        this.#client.send(
          new CopyObjectCommand({
            Bucket: this.#bucket,
            Key: this.#full(key),
            CopySource: `${this.#bucket}/${encodeURIComponent(tmp).replaceAll('%2F', '/')}`,
            MetadataDirective: 'REPLACE',
            Metadata: { [SHA_META]: info.sha256 },
          }),
        ),
      )
      return info
    } finally {
      await this.#client.send(new DeleteObjectCommand({ Bucket: this.#bucket, Key: tmp })).catch(() => {})
    }
  }

  async putIfAbsent(key: string, data: Uint8Array): Promise<CreateResult> {
    assertValidKey(key)
    const info: ObjectInfo = { key, sha256: sha256Hex(data), bytes: data.byteLength }
    if (await this.#createIfAbsent(info, data)) return { created: true, info }
    const existing = await this.head(key)
    if (!existing) throw new Error(`putIfAbsent(${key}): exists but vanished before it could be read`)
    return { created: false, info: existing }
  }

  identity(): Promise<StoreIdentity> {
    return this.#identity()
  }

  async get(key: string): Promise<Buffer> {
    const { body, expected } = await this.#getObject(key)
    const bytes = Buffer.from(await body.transformToByteArray())
    const actual = sha256Hex(bytes)
    if (actual !== expected) throw new IntegrityError(key, expected, actual)
    return bytes
  }

  async getStream(key: string): Promise<Readable> {
    const { body, expected } = await this.#getObject(key)
    const source = body as unknown as Readable
    return source.pipe(new VerifyingStream(expected, (actual) => new IntegrityError(key, expected, actual)))
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    assertValidKey(key)
    try {
      const out = await this.#call(
        `HeadObject ${key}`,
        () => this.#client.send(new HeadObjectCommand({ Bucket: this.#bucket, Key: this.#full(key) })),
        key,
      )
      const sha256 = out.Metadata?.[SHA_META]
      if (!sha256) throw new IntegrityError(key, undefined, undefined, 'object has no recorded sha256 metadata')
      return { key, sha256, bytes: out.ContentLength ?? 0 }
    } catch (error) {
      if (error instanceof NotFoundError) return undefined
      throw error
    }
  }

  async list(prefix: string, options?: ListOptions): Promise<ListPage> {
    assertValidPrefix(prefix)
    const out = await this.#call(`ListObjectsV2 ${prefix || '(all)'}`, () =>
      this.#client.send(
        new ListObjectsV2Command({
          Bucket: this.#bucket,
          Prefix: this.#full(prefix),
          MaxKeys: pageSizeOf(options),
          ...(options?.cursor === undefined ? {} : { ContinuationToken: options.cursor }),
        }),
      ),
    )
    const objects: ListEntry[] = []
    for (const object of out.Contents ?? []) {
      const key = this.#relative(object.Key ?? '')
      if (key === undefined || key.startsWith(RESERVED_PREFIX)) continue
      objects.push({ key, bytes: object.Size ?? 0 })
    }
    return out.IsTruncated && out.NextContinuationToken
      ? { objects, nextCursor: out.NextContinuationToken }
      : { objects }
  }

  async delete(key: string): Promise<void> {
    assertValidKey(key)
    await this.#call(`DeleteObject ${key}`, () =>
      this.#client.send(new DeleteObjectCommand({ Bucket: this.#bucket, Key: this.#full(key) })),
    )
  }

  /** Creates the bucket unless it exists already (local servers; a real bucket is made by its owner). */
  async createBucketIfMissing(): Promise<void> {
    try {
      await this.#call('CreateBucket', () => this.#client.send(new CreateBucketCommand({ Bucket: this.#bucket })))
    } catch (error) {
      const name = (error as Error).name
      if (name !== 'BucketAlreadyOwnedByYou' && name !== 'BucketAlreadyExists') throw error
    }
  }

  /** Closes the client's sockets. */
  destroy(): void {
    this.#client.destroy()
  }

  #full(key: string): string {
    return this.#prefix === '' ? key : `${this.#prefix}/${key}`
  }

  #relative(fullKey: string): string | undefined {
    if (this.#prefix === '') return fullKey
    return fullKey.startsWith(`${this.#prefix}/`) ? fullKey.slice(this.#prefix.length + 1) : undefined
  }

  /** One conditional PUT (If-None-Match: *): true when it created the object, false when the key existed. */
  async #createIfAbsent(info: ObjectInfo, data: Uint8Array): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#putObject(info, data, { IfNoneMatch: '*' })
        return true
      } catch (error) {
        const status = httpStatus(error)
        // 409: AWS saw concurrent conditional writes and asks the loser to retry.
        if (status === 409 && attempt < 5) {
          await sleep(20 * 2 ** attempt)
          continue
        }
        if (status !== 412) throw error
        return false
      }
    }
  }

  /** The identity record at the prefix root, created with the conditional write when absent. */
  async #readOrCreateIdentity(): Promise<StoreIdentity> {
    const where = `s3://${this.#bucket}/${this.#full(IDENTITY_NAME)} @ ${this.#endpointName}`
    const id = await readOrCreateIdentity(
      {
        read: async () => {
          try {
            const out = await this.#call(
              `GetObject ${IDENTITY_NAME}`,
              () => this.#client.send(new GetObjectCommand({ Bucket: this.#bucket, Key: this.#full(IDENTITY_NAME) })),
              IDENTITY_NAME,
            )
            if (!out.Body) throw new Error(`GetObject ${IDENTITY_NAME} returned no body`)
            return await out.Body.transformToByteArray()
          } catch (error) {
            if (error instanceof NotFoundError) return undefined
            throw error
          }
        },
        createIfAbsent: (record) =>
          this.#createIfAbsent({ key: IDENTITY_NAME, sha256: sha256Hex(record), bytes: record.byteLength }, record),
      },
      where,
    )
    return { id, location: this.location }
  }

  /** One PUT carrying the sha256 as metadata, so object and hash become visible together. */
  async #putObject(info: ObjectInfo, data: Uint8Array, conditions: { IfNoneMatch?: string }): Promise<void> {
    await this.#call(`PutObject ${info.key}`, () =>
      this.#client.send(
        new PutObjectCommand({
          Bucket: this.#bucket,
          Key: this.#full(info.key),
          Body: data,
          Metadata: { [SHA_META]: info.sha256 },
          ...conditions,
        }),
      ),
    )
  }

  async #getObject(key: string) {
    assertValidKey(key)
    const out = await this.#call(
      `GetObject ${key}`,
      () => this.#client.send(new GetObjectCommand({ Bucket: this.#bucket, Key: this.#full(key) })),
      key,
    )
    if (!out.Body) throw new Error(`GetObject ${key} returned no body`)
    const expected = out.Metadata?.[SHA_META]
    if (!expected) {
      ;(out.Body as unknown as Readable).destroy?.()
      throw new IntegrityError(key, undefined, undefined, 'object has no recorded sha256 metadata')
    }
    return { body: out.Body, expected }
  }

  async #multipart(fullKey: string, body: Readable, metadata: Record<string, string>): Promise<void> {
    const upload = new Upload({
      client: this.#client,
      params: { Bucket: this.#bucket, Key: fullKey, Body: body, Metadata: metadata },
      partSize: PART_SIZE,
      queueSize: 4,
      leavePartsOnError: false,
    })
    const watch = this.#onMultipartUpload?.(fullKey, () => upload.abort())
    if (watch) upload.on('httpUploadProgress', watch)
    await this.#call(`multipart upload ${this.#relative(fullKey) ?? fullKey}`, () => upload.done())
  }

  /**
   * Maps SDK failures to the store's typed errors (store/s3-errors.ts): NotFoundError, StoreUnavailableError,
   * StoreAccessError; anything else passes through for the retry policy.
   */
  async #call<T>(operation: string, request: () => Promise<T>, key?: string): Promise<T> {
    try {
      return await request()
    } catch (error) {
      const status = httpStatus(error)
      const name = (error as Error | undefined)?.name
      if (name === 'NoSuchBucket') {
        throw new Error(`bucket ${this.#bucket} does not exist at ${this.#endpointName}`, { cause: error })
      }
      const refused = accessRefusalCode(error) // before 404s: versitygw refuses an unknown key id with a 404
      if (!refused && key !== undefined && (status === 404 || name === 'NoSuchKey' || name === 'NotFound')) {
        throw new NotFoundError(key, this.location)
      }
      const accessKeyId = refused && refused !== 'CredentialsProviderError' ? await this.#signingKeyId() : undefined
      throw classifyS3Error(error, {
        endpoint: this.#endpointName,
        bucket: this.#bucket,
        operation,
        ...(accessKeyId === undefined ? {} : { accessKeyId }),
      })
    }
  }

  /** The access key id requests are signed with (the SDK's credential chain unless given), for messages. */
  async #signingKeyId(): Promise<string | undefined> {
    if (this.#accessKeyId !== undefined) return this.#accessKeyId
    try {
      const credentials = this.#client.config.credentials
      return typeof credentials === 'function' ? (await credentials()).accessKeyId : undefined
    } catch {
      return undefined
    }
  }
}
