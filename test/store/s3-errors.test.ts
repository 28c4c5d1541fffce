// The S3 store's failure classification (store/s3-errors.ts): refused credentials are StoreAccessError (issue
// 16, bug 5: a HEAD refused with a 403 and no body reached the CLI as `UnknownError`), an endpoint that is not
// there, or a 5xx that is not an S3 reply, is StoreUnavailableError (bug 6: the conditional-write gate's
// plain-text 502 reached the run as `@aws-sdk XML parse error: unexpected content`). First on SDK-shaped errors,
// then through the real SDK against canned HTTP replies, then through the gate in front of a closed port.
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { HeadObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3'
import { type Gate, startConditionalWriteGate } from '../../infra/conditional-write-gate.ts'
import { freePort } from '../../infra/ports.ts'
import { StoreAccessError, StoreUnavailableError } from '../../store/errors.ts'
import {
  accessKeyHint,
  accessRefusalCode,
  classifyS3Error,
  GATE_UNREACHABLE_HEADER,
  unavailableCause,
} from '../../store/s3-errors.ts'
import { S3ArtifactStore, type S3StoreOptions } from '../../store/s3-store.ts'

const ENDPOINT = 'http://127.0.0.1:9000'
const BUCKET = 'runs-bucket'
const KEY_ID = 'AKIAEXAMPLEKEYID1234'
const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'
const context = { endpoint: ENDPOINT, bucket: BUCKET, operation: 'HeadObject runs/r/run.json', accessKeyId: KEY_ID }

/** An error as the SDK throws it for an error reply it parsed (S3ServiceException and its $metadata). */
function serviceError(name: string, status: number, message: string, extra: Record<string, unknown> = {}) {
  return Object.assign(
    new S3ServiceException({ name, $fault: status < 500 ? 'client' : 'server', $metadata: { httpStatusCode: status } }),
    { message },
    extra,
  )
}

/** An error as the SDK throws it when a reply's body is not XML: a plain Error with the status attached. */
function parseError(status: number, body: string) {
  const e = new Error(
    '@aws-sdk XML parse error: unexpected content.\n  Deserialization error: to see the raw response…',
  )
  Object.defineProperty(e, '$responseBodyText', { value: body })
  Object.defineProperty(e, '$response', { value: { statusCode: status, headers: {}, body } })
  return Object.assign(e, { $metadata: { httpStatusCode: status } })
}

function assertAccess(error: unknown, code: string): StoreAccessError {
  assert.ok(error instanceof StoreAccessError, `expected StoreAccessError, got ${String(error)}`)
  assert.equal(error.code, code)
  assert.ok(error.message.includes(ENDPOINT), error.message)
  assert.ok(error.message.includes(`bucket ${BUCKET}`), error.message)
  assert.ok(!error.message.includes(SECRET), error.message)
  assert.ok(!error.message.includes(KEY_ID), `the whole access key id: ${error.message}`)
  assert.ok(!error.message.includes('UnknownError'), error.message)
  return error
}

describe('classifyS3Error on SDK-shaped errors', () => {
  it('a 403 without a body (HEAD: name Unknown, message UnknownError) is StoreAccessError', () => {
    const e = assertAccess(classifyS3Error(serviceError('Unknown', 403, 'UnknownError'), context), 'HTTP 403')
    assert.equal(e.httpStatus, 403)
    assert.match(e.message, /the credentials were refused/)
    assert.match(e.message, /HeadObject runs\/r\/run\.json/)
    assert.match(e.message, /access key id AKIA…/)
  })

  it('a 401 or 403 named only by its status, and a 403 with an HTML body, are StoreAccessError', () => {
    assertAccess(classifyS3Error(serviceError('403', 403, 'UnknownError'), context), 'HTTP 403')
    assertAccess(classifyS3Error(serviceError('Unauthorized', 401, ''), context), 'HTTP 401')
    assertAccess(classifyS3Error(parseError(403, '<html>Forbidden</html>'), context), 'HTTP 403')
  })

  it('SignatureDoesNotMatch names the wrong secret, and neither the secret nor the whole key id', () => {
    const sdk = serviceError('SignatureDoesNotMatch', 403, 'The request signature we calculated does not match…', {
      AWSAccessKeyId: KEY_ID,
      StringToSign: 'AWS4-HMAC-SHA256…',
    })
    const e = assertAccess(classifyS3Error(sdk, context), 'SignatureDoesNotMatch')
    assert.match(e.message, /secret access key is wrong/)
    assert.equal(e.cause, undefined, 'the SDK error (with its AWSAccessKeyId field) is not kept')
    assert.ok(!JSON.stringify(Object.entries(e)).includes(KEY_ID))
  })

  it('InvalidAccessKeyId, AccessDenied, ExpiredToken and no credentials at all are StoreAccessError', () => {
    assertAccess(
      classifyS3Error(serviceError('InvalidAccessKeyId', 403, 'no such key id'), context),
      'InvalidAccessKeyId',
    )
    const denied = assertAccess(
      classifyS3Error(
        serviceError('AccessDenied', 403, `User with key ${KEY_ID} is not authorized to perform: s3:GetObject`),
        context,
      ),
      'AccessDenied',
    )
    assert.match(denied.message, /the server says: User with key AKIA… is not authorized/)
    assertAccess(
      classifyS3Error(serviceError('ExpiredToken', 400, 'The provided token has expired.'), context),
      'ExpiredToken',
    )
    const none = Object.assign(new Error('Could not load credentials from any providers'), {
      name: 'CredentialsProviderError',
    })
    const e = assertAccess(classifyS3Error(none, { endpoint: ENDPOINT, bucket: BUCKET }), 'CredentialsProviderError')
    assert.match(e.message, /no credentials found/)
    assert.match(e.message, /the SDK says: Could not load credentials/)
  })

  it('a 403 about the object, not the credentials, passes through', () => {
    const e = serviceError('InvalidObjectState', 403, 'The operation is not valid for the object state')
    assert.equal(classifyS3Error(e, context), e)
    assert.equal(accessRefusalCode(e), undefined)
  })

  it('an XML parse error of a 502 (a plain-text proxy reply) is StoreUnavailableError with the body', () => {
    const e = classifyS3Error(parseError(502, 'S3 server at 127.0.0.1:1 unreachable: connect ECONNREFUSED'), context)
    assert.ok(e instanceof StoreUnavailableError, String(e))
    assert.equal(
      e.message,
      `artifact store unreachable at ${ENDPOINT}: HTTP 502 Bad Gateway that is not an S3 reply: S3 server at 127.0.0.1:1 unreachable: connect ECONNREFUSED`,
    )
    const html = classifyS3Error(parseError(504, '<html><body><h1>504 Gateway Time-out</h1></body></html>'), context)
    assert.ok(html instanceof StoreUnavailableError)
    assert.match(html.message, /HTTP 504 Gateway Timeout that is not an S3 reply: 504 Gateway Time-out$/)
  })

  it('a 5xx without a body is StoreUnavailableError; an S3 error reply with a code passes through', () => {
    const bare = classifyS3Error(serviceError('Unknown', 503, 'UnknownError'), context)
    assert.ok(bare instanceof StoreUnavailableError)
    assert.match(bare.message, /HTTP 503 Service Unavailable without an S3 error body/)
    const internal = serviceError('InternalError', 500, 'We encountered an internal error. Please try again.')
    assert.equal(classifyS3Error(internal, context), internal)
    const slowDown = serviceError('SlowDown', 503, 'Please reduce your request rate.')
    assert.equal(classifyS3Error(slowDown, context), slowDown)
  })

  it('a connection failure (ECONNREFUSED, also inside an AggregateError) is StoreUnavailableError', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9000'), { code: 'ECONNREFUSED' })
    const e = classifyS3Error(refused, context)
    assert.ok(e instanceof StoreUnavailableError)
    assert.equal(e.message, `artifact store unreachable at ${ENDPOINT}: connect ECONNREFUSED 127.0.0.1:9000`)
    const aggregate = new AggregateError([refused, refused], '')
    assert.ok(classifyS3Error(aggregate, context) instanceof StoreUnavailableError)
    const timeout = Object.assign(new Error('socket hang up'), { name: 'TimeoutError' })
    assert.ok(classifyS3Error(timeout, context) instanceof StoreUnavailableError)
  })

  it("the gate's reply about its upstream is StoreUnavailableError with the gate's reason", () => {
    const e = serviceError('ServiceUnavailable', 503, 'S3 server at 127.0.0.1:7 is unreachable: connect ECONNREFUSED')
    Object.defineProperty(e, '$response', {
      value: { statusCode: 503, headers: { [GATE_UNREACHABLE_HEADER]: 'S3 server at 127.0.0.1:7 is unreachable' } },
    })
    const typed = classifyS3Error(e, context)
    assert.ok(typed instanceof StoreUnavailableError)
    assert.equal(typed.message, `artifact store unreachable at ${ENDPOINT}: S3 server at 127.0.0.1:7 is unreachable`)
  })

  it('other failures pass through unchanged', () => {
    const missing = serviceError('NoSuchKey', 404, 'The specified key does not exist.')
    assert.equal(classifyS3Error(missing, context), missing)
    assert.equal(unavailableCause(missing), undefined)
    const conflict = serviceError('PreconditionFailed', 412, 'At least one of the preconditions failed')
    assert.equal(classifyS3Error(conflict, context), conflict)
    assert.equal(classifyS3Error('a string', context), 'a string')
    assert.equal(classifyS3Error(undefined, context), undefined)
  })

  it('shows only the start of an access key id', () => {
    assert.equal(accessKeyHint('seedflow-local'), 'seed…')
    assert.equal(accessKeyHint('abc'), 'a…')
    assert.equal(accessKeyHint(''), undefined)
    assert.equal(accessKeyHint(undefined), undefined)
  })
})

/** A fake S3 endpoint answering each request with the reply `answer` picks. */
async function cannedServer(
  answer: (method: string, url: string) => { status: number; type?: string; body?: string },
): Promise<{ server: Server; endpoint: string }> {
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      const r = answer(req.method ?? '', req.url ?? '')
      res.writeHead(r.status, { 'content-type': r.type ?? 'application/xml' })
      res.end(req.method === 'HEAD' ? undefined : r.body)
    })
  })
  await new Promise<void>((resolve) => server.listen({ host: '127.0.0.1', port: 0 }, resolve))
  return { server, endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

const SIGNATURE_XML =
  '<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we ' +
  `calculated does not match the signature you provided.</Message><AWSAccessKeyId>${KEY_ID}</AWSAccessKeyId></Error>`

/** A store on `endpoint` with the test's bucket and key pair. */
const storeAt = (endpoint: string, options: Partial<S3StoreOptions> = {}) =>
  new S3ArtifactStore({
    bucket: BUCKET,
    prefix: '',
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: KEY_ID, secretAccessKey: SECRET },
    ...options,
  })

describe('the S3 store through the real SDK against canned replies', () => {
  let canned: { server: Server; endpoint: string }
  let store: S3ArtifactStore

  before(async () => {
    canned = await cannedServer((method, url) => {
      if (url.includes('list-type=2')) return { status: 502, type: 'text/plain', body: 'upstream went away' }
      if (method === 'HEAD') return { status: 403 }
      if (method === 'GET') return { status: 403, body: SIGNATURE_XML }
      return { status: 503, type: 'text/html', body: '<html><h1>503 Service Temporarily Unavailable</h1></html>' }
    })
    store = storeAt(canned.endpoint, { prefix: 'p', maxAttempts: 1 })
  })

  after(async () => {
    store?.destroy()
    await new Promise((resolve) => canned?.server.close(resolve))
  })

  const accessRefused = (code: string) => (e: unknown) => {
    assert.ok(e instanceof StoreAccessError, `expected StoreAccessError, got ${String(e)}`)
    assert.equal(e.code, code)
    assert.ok(e.message.includes(canned.endpoint) && e.message.includes(`bucket ${BUCKET}`), e.message)
    assert.ok(!e.message.includes(SECRET) && !e.message.includes(KEY_ID), e.message)
    return true
  }

  it('head refused with a bare 403 is StoreAccessError, not UnknownError', async () => {
    await assert.rejects(store.head('runs/r/run.json'), accessRefused('HTTP 403'))
  })

  it('get refused with SignatureDoesNotMatch is StoreAccessError', async () => {
    await assert.rejects(store.get('runs/r/run.json'), accessRefused('SignatureDoesNotMatch'))
  })

  it('a plain-text 502 on list and an HTML 503 on put are StoreUnavailableError naming the endpoint', async () => {
    await assert.rejects(store.list('runs/'), (e: unknown) => {
      assert.ok(e instanceof StoreUnavailableError, `expected StoreUnavailableError, got ${String(e)}`)
      assert.equal(
        e.message,
        `artifact store unreachable at ${canned.endpoint}: HTTP 502 Bad Gateway that is not an S3 reply: upstream went away`,
      )
      return true
    })
    await assert.rejects(store.put('runs/r/x.bin', Buffer.from('x')), (e: unknown) => {
      assert.ok(e instanceof StoreUnavailableError, `expected StoreUnavailableError, got ${String(e)}`)
      // well-formed HTML parses as XML: an error reply without a code
      assert.match(e.message, /HTTP 503 Service Unavailable without an S3 error body$/)
      return true
    })
  })
})

describe('the conditional-write gate in front of a server that is gone', () => {
  let gate: Gate
  let store: S3ArtifactStore
  let upstream: number

  before(async () => {
    upstream = await freePort() // nothing listens there
    gate = await startConditionalWriteGate({ host: '127.0.0.1', port: upstream })
    store = storeAt(gate.endpoint)
  })

  after(async () => {
    store?.destroy()
    await gate?.close()
  })

  it('answers 503 with an S3 error body and its header, HEAD included', async () => {
    const reply = await fetch(`${gate.endpoint}/${BUCKET}/k`)
    assert.equal(reply.status, 503)
    assert.match(reply.headers.get(GATE_UNREACHABLE_HEADER) ?? '', /^S3 server at 127\.0\.0\.1:\d+ is unreachable: /)
    assert.match(await reply.text(), /<Error><Code>ServiceUnavailable<\/Code><Message>S3 server at /)
    const client = new S3Client({
      region: 'us-east-1',
      endpoint: gate.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: KEY_ID, secretAccessKey: SECRET },
      maxAttempts: 1,
    })
    try {
      await assert.rejects(client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'k' })), (e: unknown) => {
        assert.equal((e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode, 503)
        return true
      })
    } finally {
      client.destroy()
    }
  })

  it('makes every store operation StoreUnavailableError naming the endpoint and the server behind it', async () => {
    const expected = `artifact store unreachable at ${gate.endpoint}: S3 server at 127.0.0.1:${upstream} is unreachable: connect ECONNREFUSED`
    for (const [what, op] of [
      ['head', () => store.head('a/b.json')],
      ['get', () => store.get('a/b.json')],
      ['list', () => store.list('a/')],
      ['put', () => store.put('a/b.json', Buffer.alloc(64 * 1024))],
      ['putIfAbsent', () => store.putIfAbsent('a/c.json', Buffer.from('{}'))],
    ] as const) {
      await assert.rejects(op(), (e: unknown) => {
        assert.ok(e instanceof StoreUnavailableError, `${what}: expected StoreUnavailableError, got ${String(e)}`)
        assert.ok(e.message.startsWith(expected), `${what}: ${e.message}`)
        return true
      })
    }
  })
})
