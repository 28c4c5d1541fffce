import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { judgeSigns, signsMarkdown } from '../../bench/seed-signs.ts'
import type { EvaluationData, RunData } from '../../report/run-data.ts'

const iteration = (k: number, m: Record<string, number | null>) => ({
  iteration: k,
  finishedAt: '2026-12-02T00:00:00Z',
  metrics: m,
  configSha256: 'c',
  rolloutTokensPerSecond: null,
  inspectable: false,
})

const evaluation = (kind: string, k: number, success: number): EvaluationData => ({
  label: kind === 'iteration' ? `iteration ${k}` : kind,
  kind,
  iteration: k,
  split: 'validation',
  success,
  standardError: 0.05,
  macroSuccess: null,
  tasks: 16,
  perFamily: {},
  checkpointSha256: 'ab'.repeat(32),
  seconds: 1,
})

function run(
  opd: number[],
  gaps: Array<[number, number]>,
  parse: number[],
  evaluations: EvaluationData[],
  planned = opd.length,
): RunData {
  return {
    runId: 'r',
    plan: null,
    record: {} as RunData['record'],
    annotation: null,
    damaged: [],
    iterations: opd.map((loss, k) =>
      iteration(k, {
        'analyze/parse_rate': parse[k] ?? null,
        'rescore/teacher_gap_expert': gaps[k]?.[0] ?? null,
        'rescore/teacher_gap_other': gaps[k]?.[1] ?? null,
        'update/opd_loss': loss,
        'update/pg_loss': -0.1,
        'update/opd_gate_mean': 0.45,
        'rollout/success_rate': 0.25,
      }),
    ) as RunData['iterations'],
    evaluations,
    hyperparameters: [],
    stageSeconds: {},
    lastWrite: '',
    progress: { complete: opd.length, planned, finished: true },
  }
}

describe('seed-signs', () => {
  const evals = [evaluation('base', -1, 0.1), evaluation('stage1', -1, 0.2), evaluation('iteration', 5, 0.3)]
  const gaps: Array<[number, number]> = [
    [-1, -2],
    [-1, -2],
    [-1, -2],
    [-1, -2],
    [-1, -2],
    [-3, -2],
  ]

  it('passes a run that shows every sign, measuring success from the Stage 1 evaluation', () => {
    const r = judgeSigns(run([0.02, 0.018, 0.015, 0.012, 0.011, 0.01], gaps, [0.6, 0.7, 0.8, 0.7, 0.6, 0.5], evals))
    assert.deepEqual(
      r.signs.map((s) => s.passed),
      [true, true, true, true],
    )
    assert.match(r.signs[1]?.figures ?? '', /^5 of 6 iterations/)
    assert.match(r.signs[3]?.figures ?? '', /stage1 20.0% → iteration 5 30.0%/)
    assert.match(signsMarkdown(r), /\| held-out success above its start \| passed \|/)
  })

  it('fails each sign whose figures miss it, and says why', () => {
    const r = judgeSigns(
      run(
        [0.01, 0.01, 0.012, 0.012, 0.02, 0.02],
        gaps.map(([e, o]) => [o, e] as [number, number]),
        [0.6, 0.4, 0.8, 0.7, 0.6, 0.5],
        [evaluation('stage1', -1, 0.3), evaluation('iteration', 5, 0.3)],
      ),
    )
    assert.deepEqual(
      r.signs.map((s) => s.passed),
      [false, false, false, false],
    )
    assert.match(r.signs[0]?.figures ?? '', /below or missing in iterations 1\)$/)
    assert.match(r.signs[1]?.figures ?? '', /^1 of 6/)
    assert.match(r.signs[2]?.figures ?? '', /0\.0100 → 0\.0200/)
    assert.match(signsMarkdown(r), /\*\*failed\*\*/)
  })

  it('counts a skill that copies the format placeholder as no skill', () => {
    const data = run([0.02, 0.01, 0.01], gaps, [1, 1, 1], evals)
    ;(data.iterations[1]?.metrics as Record<string, number | null>)['analyze/placeholder_rate'] = 0.75
    const r = judgeSigns(data, new Map([[2, 0.25]]))
    assert.deepEqual(
      r.iterations.map((it) => it.placeholderRate),
      [null, 0.75, 0.25],
    )
    assert.equal(r.signs[0]?.passed, false)
    assert.equal(
      r.signs[0]?.figures,
      '1.00, 0.25, 0.75 (below or missing in iterations 1); parse rate counting them 1.00, 1.00, 1.00',
    )
  })

  it('leaves an iteration without OPD out of its third, fails a third with none, and marks an evaluation that is not the final one', () => {
    const r = judgeSigns(
      run([0.02, 0.01, 0.01], gaps, [0.9, 0.9, 0.9], evals.slice(0, 2).concat(evaluation('iteration', 1, 0.5)), 8),
    )
    assert.equal(r.signs[2]?.passed, true)
    assert.match(r.signs[3]?.figures ?? '', /not the final iteration/)
    const missing = run([0.02, 0.01, 0.01], gaps, [0.9, 0.9, 0.9], evals)
    ;(missing.iterations[1]?.metrics as Record<string, number | null>)['update/opd_loss'] = null
    assert.equal(judgeSigns(missing).signs[2]?.passed, true)
    assert.match(judgeSigns(missing).signs[2]?.figures ?? '', /no OPD in iterations 1\)$/)
    ;(missing.iterations[0]?.metrics as Record<string, number | null>)['update/opd_loss'] = null
    assert.equal(judgeSigns(missing).signs[2]?.passed, false)
    assert.equal(
      judgeSigns(run([], [], [], [])).signs.every((s) => !s.passed),
      true,
    )
  })
})
