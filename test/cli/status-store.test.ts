// `seedflow status` and one store per run: the store a run lives in, running or closed; which worker serves a run
// that answers no status query (a `seedflow run`'s run needs `--run`).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { formatResult, formatStatus, workerFor } from '../../cli/status-command.ts'
import type { RunStatus, SeedRunResult } from '../../workflows/seed-run.ts'

const STORE = { id: '0b7f3c52-6a1e-4d8e-9b1a-2f4c5d6e7f80', location: '/data/seedflow/artifacts' }

const status: RunStatus = {
  runId: 'r1',
  phase: 'prepare',
  iteration: 0,
  iterations: 4,
  algorithm: 'seed',
  evaluations: [],
  paused: false,
  held: false,
  awaitingOperator: null,
  hyperparameters: [],
  configSha256: 'abcdef0123456789',
  aborted: null,
}

describe('seedflow status: the run’s store', () => {
  it('shows the store of a running run, and no store line for a run that records none', () => {
    const text = formatStatus({ ...status, store: STORE }, 'RUNNING').join('\n')
    assert.match(text, /\n {2}store {7}0b7f3c52-6a1e-4d8e-9b1a-2f4c5d6e7f80 \(\/data\/seedflow\/artifacts\)(\n|$)/)
    assert.doesNotMatch(formatStatus(status, 'RUNNING').join('\n'), /store/)
  })

  it('shows the store of a closed run from its result', () => {
    const result: SeedRunResult = { runId: 'r1', checkpoint: null, evaluations: [], outcome: 'completed', store: STORE }
    assert.ok(formatResult(result).includes(`  store       ${STORE.id} (${STORE.location})`))
  })

  it('names the worker that serves the run: --run for a run on its own queues', () => {
    assert.equal(workerFor('r1', 'seedflow'), 'seedflow worker')
    assert.equal(workerFor('r1', 'seedflow@r1'), 'seedflow worker --run r1')
  })
})
