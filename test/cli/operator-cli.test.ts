import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { ApplicationFailure, WorkflowFailedError } from '@temporalio/client'
import { parseAssignment, readOverrides } from '../../cli/overrides.ts'
import { formatFailure, formatResult, formatStatus, progressBar } from '../../cli/status-command.ts'
import type { RunStatus } from '../../workflows/seed-run.ts'

describe('seedflow retry overrides', () => {
  it('parses path=value with JSON values and bare words', () => {
    assert.deepEqual(parseAssignment('stage2.lr=1e-4'), { stage2: { lr: 1e-4 } })
    assert.deepEqual(parseAssignment('stage2.perEpisodeWeight=true'), { stage2: { perEpisodeWeight: true } })
    assert.deepEqual(parseAssignment('stage2.advantageMode=mean'), { stage2: { advantageMode: 'mean' } })
    assert.throws(() => parseAssignment('stage2.lr'), /expected path=value/)
    assert.throws(() => parseAssignment('stage2..lr=1'), /expected path=value/)
  })

  it('lays --set over the --overrides file, and names a missing or malformed file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'seedflow-overrides-'))
    try {
      const file = join(dir, 'o.json')
      await writeFile(file, JSON.stringify({ stage2: { lr: 1e-3, klCoef: 0.1 } }))
      assert.deepEqual(await readOverrides({ overrides: file, set: ['stage2.lr=1e-4'] }), {
        stage2: { lr: 1e-4, klCoef: 0.1 },
      })
      assert.equal(await readOverrides({}), undefined)
      await assert.rejects(readOverrides({ overrides: join(dir, 'missing.json') }), /cannot read the overrides file/)
      await writeFile(file, '{ not json')
      await assert.rejects(readOverrides({ overrides: file }), /o\.json is not JSON/)
      await writeFile(file, '[1]')
      await assert.rejects(readOverrides({ overrides: file }), /expected an object/)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe('seedflow status', () => {
  const status: RunStatus = {
    runId: 'r1',
    phase: 'awaiting-operator',
    iteration: 1,
    iterations: 4,
    algorithm: 'seed',
    evaluations: [{ label: 'base', iteration: -1, success: 0.25, standardError: 0.1, tasks: 8, manifestKey: 'm' }],
    paused: true,
    held: true,
    awaitingOperator: {
      type: 'NonFiniteLossError',
      message: 'update: the pg loss term is NaN in mini-batch 2 of 3',
      iteration: 1,
      phase: 'update',
      since: '2026-01-01T00:00:00.000Z',
    },
    hyperparameters: [
      {
        seq: 0,
        source: 'setHyperparameters',
        iteration: 1,
        phase: 'iteration',
        overrides: { stage2: { lr: 1e12 } },
        cumulative: { stage2: { lr: 1e12 } },
        at: '2026-01-01T00:00:00.000Z',
        configSha256: 'abcdef0123456789',
      },
    ],
    configSha256: 'abcdef0123456789',
    aborted: null,
  }

  it('draws the iteration progress bar', () => {
    assert.equal(progressBar(1, 4, 8), '[##------] 1/4')
    assert.equal(progressBar(0, 0, 4), '[----] 0/0')
    assert.equal(progressBar(5, 4, 4), '[####] 5/4')
  })

  it('shows the phase, progress, pause, the failure with what to do, evaluations and changes', () => {
    const text = formatStatus(status, 'RUNNING').join('\n')
    assert.match(text, /^run r1: seed, config abcdef012345 — workflow RUNNING/)
    assert.match(text, /iterations +\[#####-+\] 1\/4/)
    assert.match(text, /paused +yes, held between phases/)
    assert.match(
      text,
      /AWAITING AN OPERATOR since 2026-01-01T00:00:00.000Z: NonFiniteLossError in update \(iteration 1\)/,
    )
    assert.match(text, /the pg loss term is NaN in mini-batch 2 of 3/)
    assert.match(text, /seedflow retry r1/)
    assert.match(text, /base +25\.0% ± 10\.0% \(8 tasks\)/)
    assert.match(text, /#0 setHyperparameters during iteration 1: \{"stage2":\{"lr":1000000000000\}\}/)
    const running = formatStatus({ ...status, phase: 'iteration', awaitingOperator: null, paused: false }, 'RUNNING', {
      phase: 'rollout',
      held: false,
    }).join('\n')
    assert.match(running, /phase +iteration 1: rollout/)
    assert.doesNotMatch(running, /AWAITING|paused/)
    const heldChild = formatStatus({ ...status, phase: 'iteration', held: false }, 'RUNNING', {
      phase: 'update',
      held: true,
    }).join('\n')
    assert.match(heldChild, /phase +iteration 1: held before update/)
    assert.match(heldChild, /paused +yes, held before update/)
    assert.doesNotMatch(heldChild, /phase +iteration 1: update/)
    const heldRun = formatStatus({ ...status, next: 'evaluate', awaitingOperator: null }, 'RUNNING').join('\n')
    assert.match(heldRun, /phase +held before evaluate/)
    assert.match(heldRun, /paused +yes, held before evaluate/)
  })

  it('after an abort of a paused run, says it is aborting, not paused', () => {
    // the workflow clears `paused` and records the reason when the abort signal arrives
    const text = formatStatus(
      { ...status, paused: false, held: false, awaitingOperator: null, aborted: 'enough' },
      'RUNNING',
    ).join('\n')
    assert.match(text, /aborting +enough — the run ends after its running phase/)
    assert.doesNotMatch(text, /paused/)
  })

  it('gives the hint that fits the failure', () => {
    const wait = status.awaitingOperator as NonNullable<RunStatus['awaitingOperator']>
    const hint = (type: string) =>
      formatStatus({ ...status, awaitingOperator: { ...wait, type } }, 'RUNNING').join('\n')
    assert.match(hint('NonFiniteLossError'), /seedflow retry r1 --set stage2\.lr=<smaller>/)
    for (const type of ['ModelImportError', 'StoreUnavailableError', 'IntegrityError', 'StoreAccessError']) {
      assert.doesNotMatch(hint(type), /stage2\.lr/, type)
      assert.match(hint(type), /seedflow retry r1 +or: seedflow abort r1/, type)
    }
    assert.match(hint('ModelImportError'), /model folder/)
    assert.match(hint('StoreUnavailableError'), /artifact store/)
    assert.match(hint('IntegrityError'), /seedflow audit r1/)
  })

  it('shows how a closed run ended: the failure chain of a failed one, the result of a completed one', () => {
    const cause = new ApplicationFailure('invalid run input:\nstage2.lr: Too small\nseed: Required', 'InvalidRunConfig')
    const failed = formatFailure(new WorkflowFailedError('Workflow execution failed', cause, 'NON_RETRYABLE_FAILURE'))
    assert.deepEqual(failed, [
      '  failure     InvalidRunConfig: invalid run input:',
      '    stage2.lr: Too small',
      '    seed: Required',
    ])
    const huge = formatFailure(new WorkflowFailedError('x', new ApplicationFailure('y'.repeat(1e6), 'Big'), undefined))
    assert.ok(huge.join('\n').length < 5000)
    assert.match(huge[0] ?? '', /more characters cut\)$/)
    const done = formatResult({
      runId: 'r1',
      checkpoint: { prefix: 'runs/r1/iterations/0003/checkpoint/', sha256: 'ab'.repeat(32) },
      evaluations: status.evaluations,
      outcome: 'aborted',
      aborted: 'enough',
    } as never).join('\n')
    assert.match(done, /outcome +aborted: enough/)
    assert.match(done, /base +25\.0% ± 10\.0% \(8 tasks\)/)
    assert.match(done, /checkpoint +runs\/r1\/iterations\/0003\/checkpoint\//)
  })
})
