// seedflow's own Prometheus metrics of one worker process (the Temporal SDK exports its own on a second port,
// see metricsRuntimeOptions). Everything comes from what the phase wrapper already reports: each finished shard's
// event carries its manifest's statistics, and the `metrics` phase's statistics are the iteration's headline
// metrics (records/iteration-metrics.ts); failures come from an activity interceptor.
import { createServer, type Server } from 'node:http'
import type { ActivityInterceptorsFactory } from '@temporalio/worker'
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client'
import type { PhaseEvent } from '../activities/phase.ts'
import type { IterationMetricName } from '../records/iteration-metrics.ts'

/** The gauges set from an iteration's headline metrics (the `metrics` phase): metric name → gauge + labels. */
const LOSS_TERMS = {
  total: 'update/loss',
  pg: 'update/pg_loss',
  kl: 'update/kl',
  entropy: 'update/entropy',
  opd: 'update/opd_loss',
} as const satisfies Record<string, IterationMetricName>

/** Per shard statistic → token counter kind: sampled by the policy, or trained on. */
const TOKEN_STATS: Record<string, { stat: string; kind: 'sampled' | 'trained' }> = {
  rollout: { stat: 'newTokens', kind: 'sampled' },
  analyze: { stat: 'newTokens', kind: 'sampled' },
  update: { stat: 'tokens', kind: 'trained' },
}

/** Per shard statistics → prompts built and prompts truncated to fit the budget. */
const PROMPT_STATS: Record<string, { prompts: string; truncated: string }> = {
  rollout: { prompts: 'prompts', truncated: 'promptsTruncated' },
  analyze: { prompts: 'skills', truncated: 'truncated' },
  rescore: { prompts: 'teacherPrompts', truncated: 'teacherPromptsTruncated' },
}

/** Stage 1's annotation statistics (the `annotate` and `sft` shards) → the event label of the annotator counter. */
const ANNOTATION_STATS: Record<string, string> = {
  requests: 'request',
  retries: 'retry',
  requestFailures: 'request_failure',
  unparsed: 'unparsed',
  annotated: 'skill',
  repliesReused: 'reused',
}

export interface WorkerMetrics {
  registry: Registry
  /** Feed every phase event here (PhaseCounters' listener). */
  onPhaseEvent(event: PhaseEvent): void
  /** Counts failed activities by activity type and error type. */
  activityInterceptor: ActivityInterceptorsFactory
  /** Serves the registry at http://host:port/metrics; resolves with the bound port once listening. */
  serve(host: string, port: number): Promise<{ port: number; close(): Promise<void> }>
}

function numberIn(stats: unknown, name: string): number | undefined {
  const v = (stats as Record<string, unknown> | undefined)?.[name]
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined
}

/** `role` (control, rollout, train, local) labels every metric of this process. */
export function createWorkerMetrics(role: string): WorkerMetrics {
  const registry = new Registry()
  registry.setDefaultLabels({ role })
  collectDefaultMetrics({ register: registry, prefix: 'seedflow_' })
  const registers = [registry]

  const phaseDuration = new Histogram({
    name: 'seedflow_phase_duration_seconds',
    help: 'Wall time of a phase shard in the phase wrapper; outcome computed, or reused from its finished manifest',
    labelNames: ['phase', 'outcome'],
    buckets: [0.05, 0.25, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600],
    registers,
  })
  const tokens = new Counter({
    name: 'seedflow_tokens_total',
    help: 'Tokens sampled (rollout, analyze) or trained on (update) by computed shards',
    labelNames: ['phase', 'kind'],
    registers,
  })
  const tokensPerSecond = new Gauge({
    name: 'seedflow_tokens_per_second',
    help: "The last computed shard's tokens per second of its own compute time",
    labelNames: ['phase', 'kind'],
    registers,
  })
  const prompts = new Counter({
    name: 'seedflow_prompts_total',
    help: 'Prompts built by computed shards',
    labelNames: ['phase'],
    registers,
  })
  const truncated = new Counter({
    name: 'seedflow_prompts_truncated_total',
    help: 'Prompts that lost history (or their skill block) to fit the prompt budget',
    labelNames: ['phase'],
    registers,
  })
  const annotations = new Counter({
    name: 'seedflow_annotator_events_total',
    help: 'Stage 1 annotation by computed shards: requests to an external annotator, retries, trajectories left without a reply, unparsed replies, skills written, replies reused',
    labelNames: ['phase', 'event'],
    registers,
  })
  const iterationGauge = (name: string, help: string, labelNames: string[] = []) =>
    new Gauge({ name, help, labelNames: ['run', ...labelNames], registers })
  const iteration = iterationGauge('seedflow_iteration', 'The last iteration whose metrics were recorded')
  const success = iterationGauge('seedflow_rollout_success_rate', "Rollout success rate of the run's last iteration")
  const loss = iterationGauge('seedflow_loss', "Loss terms of the run's last update (means over mini-batches)", [
    'term',
  ])
  const gate = iterationGauge('seedflow_opd_gate_mean', 'OPD gate mean over the distilled tokens of the last update')
  const parseRate = iterationGauge('seedflow_skill_parse_rate', 'Share of analyzed trajectories whose skill parsed')
  const evaluation = iterationGauge('seedflow_evaluation_success_rate', 'Held-out success of the last evaluation')
  const failures = new Counter({
    name: 'seedflow_activity_failures_total',
    help: 'Failed activity attempts, by activity and error type',
    labelNames: ['activity', 'type'],
    registers,
  })

  function onIterationMetrics(runId: string, k: number | undefined, stats: unknown): void {
    if (k !== undefined) iteration.set({ run: runId }, k)
    // NaN where a metric does not apply to this iteration (no distilled token, no analyze phase): the gauge
    // shows the last iteration, never a value left over from an earlier one
    const set = (gauge: Gauge, name: IterationMetricName, labels: Record<string, string> = {}) =>
      gauge.set({ run: runId, ...labels }, numberIn(stats, name) ?? Number.NaN)
    set(success, 'rollout/success_rate')
    set(gate, 'update/opd_gate_mean')
    set(parseRate, 'analyze/parse_rate')
    // A loss term that does not apply to this update (its term is off, or no token was distilled for opd) has
    // no sample at all rather than NaN: Prometheus never sees NaN, and no value is left over from an earlier one
    const distilled = (numberIn(stats, 'update/opd_tokens') ?? 0) > 0
    for (const [term, name] of Object.entries(LOSS_TERMS)) {
      const v = numberIn(stats, name)
      if (v === undefined || (term === 'opd' && !distilled)) loss.remove({ run: runId, term })
      else loss.set({ run: runId, term }, v)
    }
  }

  function onComputed(phase: string, stats: unknown): void {
    const t = TOKEN_STATS[phase]
    const n = t && numberIn(stats, t.stat)
    if (t && n !== undefined) {
      tokens.inc({ phase, kind: t.kind }, n)
      const seconds = numberIn(stats, 'seconds')
      if (seconds) tokensPerSecond.set({ phase, kind: t.kind }, n / seconds)
    }
    if (phase === 'annotate' || phase === 'sft') {
      for (const [stat, event] of Object.entries(ANNOTATION_STATS)) {
        const v = numberIn(stats, stat)
        if (v !== undefined) annotations.inc({ phase, event }, v)
      }
    }
    const p = PROMPT_STATS[phase]
    if (p) {
      prompts.inc({ phase }, numberIn(stats, p.prompts) ?? 0)
      truncated.inc({ phase }, numberIn(stats, p.truncated) ?? 0)
    }
  }

  return {
    registry,
    onPhaseEvent(e) {
      const { phase, runId } = e.scope
      if (e.event === 'computing') return
      if (e.event === 'computed') onComputed(phase, e.stats)
      if (e.seconds !== undefined) phaseDuration.observe({ phase, outcome: e.event }, e.seconds)
      if (phase === 'metrics') onIterationMetrics(runId, e.scope.iteration, e.stats)
      if (phase === 'evaluate') {
        const v = numberIn(e.stats, 'success')
        if (v !== undefined) evaluation.set({ run: runId }, v)
      }
    },
    activityInterceptor: (ctx) => ({
      inbound: {
        async execute(input, next) {
          try {
            return await next(input)
          } catch (error) {
            const e = error as { type?: string; name?: string }
            failures.inc({ activity: ctx.info.activityType, type: e?.type ?? e?.name ?? 'unknown' })
            throw error
          }
        },
      },
    }),
    serve: (host, port) => serveRegistry(registry, host, port),
  }
}

/** A tiny HTTP server: GET /metrics answers the registry's exposition; anything else 404. */
function serveRegistry(registry: Registry, host: string, port: number) {
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404).end('not found; metrics are at /metrics\n')
      return
    }
    registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(body),
      (error: Error) => res.writeHead(500).end(`${error.message}\n`),
    )
  })
  return new Promise<{ port: number; close(): Promise<void> }>((resolve, reject) => {
    server.once('error', (error) =>
      reject(new Error(`cannot serve metrics on ${host}:${port}: ${(error as Error).message}`)),
    )
    server.listen({ host, port }, () => {
      const address = server.address()
      resolve({
        port: typeof address === 'object' && address ? address.port : port,
        close: () => new Promise<void>((done) => server.close(() => done())),
      })
    })
  })
}

/**
 * The Runtime telemetry options that serve the Temporal SDK's own metrics (worker task slots, poll latencies,
 * activity and workflow task counts, sticky cache, ...) at http://host:port/metrics. Runtime.install takes them
 * once per process, before any connection or worker exists.
 */
export function sdkMetricsTelemetry(host: string, port: number) {
  return { metrics: { prometheus: { bindAddress: `${host}:${port}`, useSecondsForDurations: true } } }
}
