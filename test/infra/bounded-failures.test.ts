// What leaves an activity is bounded: a 9 MB message (beyond gRPC's 4 MB, which made the completion fail and the
// attempt wait for its timeout) becomes a few KiB with its cut marked; type and retryability are kept.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ApplicationFailure, CancelledFailure } from '@temporalio/common'
import { bounded, MESSAGE_LIMIT } from '../../infra/bounded-text.ts'
import { boundFailure } from '../../workers/bounded-failures.ts'

const NINE_MB = 9 * 1024 * 1024

describe('bounded failures', () => {
  it('leaves short text alone and marks a cut', () => {
    assert.equal(bounded('abc', 5), 'abc')
    assert.equal(bounded('abcdefgh', 5), 'abcde … (3 more characters cut)')
  })

  it('bounds a huge non-retryable ApplicationFailure, keeping its type, retryability and a bounded cause', () => {
    const cause = new Error('c'.repeat(NINE_MB))
    const huge = ApplicationFailure.create({
      message: `model.folder ${'x'.repeat(NINE_MB)}`,
      type: 'ModelImportError',
      nonRetryable: true,
      details: ['d'.repeat(NINE_MB)],
      cause,
    })
    const out = boundFailure(huge) as ApplicationFailure
    assert.ok(out instanceof ApplicationFailure)
    assert.equal(out.type, 'ModelImportError')
    assert.equal(out.nonRetryable, true)
    assert.ok(out.message.length < MESSAGE_LIMIT + 100, `${out.message.length}`)
    assert.match(out.message, /^model\.folder x+ … \(\d+ more characters cut\)$/)
    assert.ok(JSON.stringify(out.details).length < 20_000)
    assert.ok((out.stack ?? '').length < 9000)
    assert.ok(out.cause instanceof ApplicationFailure)
    assert.ok((out.cause as Error).message.length < MESSAGE_LIMIT + 100)
  })

  it('turns a huge plain error into a retryable failure named by its class', () => {
    const e = new RangeError('r'.repeat(NINE_MB))
    const out = boundFailure(e) as ApplicationFailure
    assert.equal(out.type, 'RangeError')
    assert.equal(out.nonRetryable, false)
    assert.ok(out.message.length < MESSAGE_LIMIT + 100)
  })

  it('passes small failures and cancellations through unchanged', () => {
    const small = ApplicationFailure.nonRetryable('bad lr', 'InvalidRunConfig')
    assert.equal(boundFailure(small), small)
    const cancelled = new CancelledFailure('cancelled')
    assert.equal(boundFailure(cancelled), cancelled)
  })
})
