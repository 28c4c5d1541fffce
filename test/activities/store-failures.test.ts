// The store's typed failures as the pipeline activities pass them on (issue 16): refused credentials
// (StoreAccessError) become a non-retryable failure at once; an unreachable store (StoreUnavailableError) stays
// retryable, so Temporal retries the activity and the run then waits for an operator naming the endpoint.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ActivityFailure, ApplicationFailure, RetryState } from '@temporalio/common'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import type { Engine } from '../../engine/index.ts'
import type { ArtifactStore } from '../../store/artifact-store.ts'
import { StoreAccessError, StoreUnavailableError } from '../../store/errors.ts'
import { describeFailure } from '../../workflows/operator.ts'
import { microConfig } from '../compute/micro.ts'

/** A store whose every operation fails with `error`. */
function failingStore(error: Error): ArtifactStore {
  const fail = async () => {
    throw error
  }
  return {
    location: 's3://b/p @ http://127.0.0.1:9',
    put: fail,
    putStream: fail,
    putIfAbsent: fail,
    get: fail,
    getStream: fail,
    head: fail,
    list: fail,
    delete: fail,
    identity: fail,
  }
}

const engine = {} as Engine // planRun never reaches the engine
const refused = () =>
  new StoreAccessError('http://127.0.0.1:9', 'b', {
    code: 'SignatureDoesNotMatch',
    httpStatus: 403,
    operation: 'PutObject runs/r/run.json',
    detail: '',
    accessKeyHint: 'seed…',
  })
const unreachable = () =>
  new StoreUnavailableError(
    'http://127.0.0.1:9',
    new Error('S3 server at 127.0.0.1:8 is unreachable: connect ECONNREFUSED 127.0.0.1:8'),
  )

async function planRunError(error: Error): Promise<unknown> {
  const acts = createPipelineActivities({ store: failingStore(error), engine })
  return acts.planRun({ runId: 'r', config: microConfig('seed') }).then(
    () => assert.fail('planRun succeeded'),
    (e: unknown) => e,
  )
}

describe('store failures through the pipeline activities', () => {
  it('StoreAccessError becomes a non-retryable failure of that type', async () => {
    const e = await planRunError(refused())
    assert.ok(e instanceof ApplicationFailure, String(e))
    assert.equal(e.type, 'StoreAccessError')
    assert.equal(e.nonRetryable, true)
    assert.match(e.message, /^planRun: artifact store at http:\/\/127\.0\.0\.1:9 refused access to bucket b: /)
  })

  it('StoreUnavailableError passes through as it is: retryable', async () => {
    const original = unreachable()
    assert.equal(await planRunError(original), original)
  })

  it('after the retries, the operator wait names the type and the endpoint', () => {
    // what the worker reports for the thrown StoreUnavailableError, inside the activity failure the workflow sees
    const error = unreachable()
    const failure = new ActivityFailure(
      'Activity task failed',
      'rollout',
      '7',
      RetryState.MAXIMUM_ATTEMPTS_REACHED,
      'worker',
      ApplicationFailure.create({ message: error.message, type: error.name }),
    )
    const wait = describeFailure(failure, 0, '2026-01-01T00:00:00Z')
    assert.equal(wait.type, 'StoreUnavailableError')
    assert.equal(wait.phase, 'rollout')
    assert.equal(
      wait.message,
      'artifact store unreachable at http://127.0.0.1:9: S3 server at 127.0.0.1:8 is unreachable: connect ECONNREFUSED 127.0.0.1:8',
    )
  })
})
