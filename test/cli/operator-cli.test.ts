import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { parseAssignment, readOverrides } from '../../cli/overrides.ts'
import { formatStatus, progressBar } from '../../cli/status-command.ts'
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
    assert.match(heldChild, /phase +iteration 1: update/)
    assert.match(heldChild, /paused +yes, held between phases/)
  })
})
