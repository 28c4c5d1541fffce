// The worker's Prometheus exposition of an iteration's loss terms: a term that does not apply to the update
// (no token distilled for opd, a term that is off) has no sample, never NaN, and never a value left over from
// an earlier iteration; a term that applies is exported with its value.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { PhaseEvent } from '../../activities/phase.ts'
import { createWorkerMetrics } from '../../workers/metrics.ts'

/** The `metrics` phase's event for iteration k with these headline metrics. */
function metricsEvent(runId: string, k: number, stats: Record<string, number | null>): PhaseEvent {
  return {
    event: 'computed',
    scope: { runId, phase: 'metrics', shard: 0, iteration: k },
    attempt: 0,
    seconds: 0.1,
    stats,
  }
}

const UPDATE = { 'update/loss': 0.5, 'update/pg_loss': 0.25, 'update/kl': 0.001, 'update/entropy': 6.5 }

async function lossLines(metrics: ReturnType<typeof createWorkerMetrics>): Promise<string[]> {
  return (await metrics.registry.metrics()).split('\n').filter((line) => line.startsWith('seedflow_loss{'))
}

describe('worker metrics: seedflow_loss', () => {
  it('exports no opd sample, and no NaN, when no token was distilled', async () => {
    const metrics = createWorkerMetrics('test')
    metrics.onPhaseEvent(
      metricsEvent('run-a', 0, {
        ...UPDATE,
        'update/opd_loss': null,
        'update/opd_tokens': 0,
        'update/opd_gate_mean': null,
      }),
    )
    const lines = await lossLines(metrics)
    assert.deepEqual(
      lines.filter((l) => /NaN/.test(l)),
      [],
      lines.join('\n'),
    )
    assert.deepEqual(
      lines.filter((l) => l.includes('term="opd"')),
      [],
    )
    assert.ok(
      lines.some((l) => l.includes('term="total"') && l.endsWith(' 0.5')),
      lines.join('\n'),
    )
    // a value with no distilled token behind it (an opd term computed over an empty mask) is not a loss either
    metrics.onPhaseEvent(metricsEvent('run-a', 1, { ...UPDATE, 'update/opd_loss': 0, 'update/opd_tokens': 0 }))
    assert.deepEqual(
      (await lossLines(metrics)).filter((l) => l.includes('term="opd"')),
      [],
    )
  })

  it('exports the opd term when tokens were distilled, and drops it again at an iteration without', async () => {
    const metrics = createWorkerMetrics('test')
    metrics.onPhaseEvent(metricsEvent('run-b', 0, { ...UPDATE, 'update/opd_loss': 0.125, 'update/opd_tokens': 42 }))
    const opd = (await lossLines(metrics)).filter((l) => l.includes('term="opd"'))
    assert.equal(opd.length, 1)
    assert.match(opd[0] ?? '', /^seedflow_loss\{.*run="run-b".*\} 0\.125$/)
    metrics.onPhaseEvent(metricsEvent('run-b', 1, { ...UPDATE, 'update/opd_loss': null, 'update/opd_tokens': 0 }))
    const after = await lossLines(metrics)
    assert.deepEqual(
      after.filter((l) => l.includes('term="opd"')),
      [],
      'no value left over from iteration 0',
    )
    assert.deepEqual(
      after.filter((l) => /NaN/.test(l)),
      [],
    )
  })

  it('exports no sample for a term that is off or not finite (kl, entropy), keeping the other runs', async () => {
    const metrics = createWorkerMetrics('test')
    metrics.onPhaseEvent(metricsEvent('run-c', 0, { ...UPDATE, 'update/opd_loss': 0.5, 'update/opd_tokens': 3 }))
    metrics.onPhaseEvent(
      metricsEvent('run-d', 0, {
        'update/loss': 1,
        'update/pg_loss': 1,
        'update/kl': null,
        'update/entropy': Number.NaN,
      }),
    )
    const lines = await lossLines(metrics)
    assert.deepEqual(
      lines.filter((l) => /NaN/.test(l)),
      [],
    )
    assert.deepEqual(
      lines.filter((l) => l.includes('run="run-d"') && /term="(kl|entropy|opd)"/.test(l)),
      [],
    )
    assert.equal(lines.filter((l) => l.includes('run="run-c"')).length, 5, 'every term of run-c')
  })
})

describe('worker metrics: seedflow_annotator_events_total', () => {
  it("counts Stage 1's annotator events from the annotate and sft shards' statistics", async () => {
    const metrics = createWorkerMetrics('test')
    const stats = { annotated: 3, unparsed: 2, requestFailures: 1, requests: 9, retries: 3, repliesReused: 0 }
    for (const phase of ['sft', 'sft', 'annotate'] as const)
      metrics.onPhaseEvent({ event: 'computed', scope: { runId: 'r', phase, shard: 0 }, attempt: 0, stats })
    const lines = (await metrics.registry.metrics())
      .split('\n')
      .filter((l) => l.startsWith('seedflow_annotator_events_total{'))
    const value = (phase: string, event: string) =>
      Number(lines.find((l) => l.includes(`phase="${phase}"`) && l.includes(`event="${event}"`))?.split(' ')[1])
    assert.equal(value('sft', 'request'), 18)
    assert.equal(value('sft', 'retry'), 6)
    assert.equal(value('sft', 'request_failure'), 2)
    assert.equal(value('sft', 'unparsed'), 4)
    assert.equal(value('sft', 'skill'), 6)
    assert.equal(value('annotate', 'request'), 9)
  })
})
