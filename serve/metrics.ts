// Prometheus metrics of `seedflow serve` (prom-client, one registry per server): the queue, the running batch,
// tokens, decode steps and their occupancy, time to first token, and tokens per second over a sliding window.
import { Counter, Gauge, Histogram, Registry } from 'prom-client'

export interface ServeMetrics {
  registry: Registry
  queueLength: Gauge
  runningSequences: Gauge
  requests: Counter<'endpoint' | 'status'>
  promptTokens: Counter
  generatedTokens: Counter
  decodeSteps: Counter
  stepRows: Counter
  prefills: Counter
  stepOccupancy: Histogram
  timeToFirstToken: Histogram
  /** Records `n` tokens sampled now, for the tokens-per-second window. */
  sampled(n: number): void
}

export const TOKENS_PER_SECOND_WINDOW_S = 10

export function createServeMetrics(now: () => number = () => performance.now()): ServeMetrics {
  const registry = new Registry()
  const registers = [registry]
  const window: { at: number; n: number }[] = []
  const trim = (t: number) => {
    while (window.length > 0 && t - (window[0] as { at: number }).at > TOKENS_PER_SECOND_WINDOW_S * 1000) window.shift()
  }
  const generatedTokens = new Counter({
    name: 'seedflow_serve_generated_tokens_total',
    help: 'Tokens sampled for clients (every choice)',
    registers,
  })
  new Gauge({
    name: 'seedflow_serve_tokens_per_second',
    help: `Tokens sampled per second over the last ${TOKENS_PER_SECOND_WINDOW_S} s`,
    registers,
    collect() {
      const t = now()
      trim(t)
      this.set(window.reduce((s, w) => s + w.n, 0) / TOKENS_PER_SECOND_WINDOW_S)
    },
  })
  return {
    registry,
    queueLength: new Gauge({
      name: 'seedflow_serve_queue_length',
      help: 'Requests waiting for a row of the decode batch',
      registers,
    }),
    runningSequences: new Gauge({
      name: 'seedflow_serve_running_sequences',
      help: 'Sequences in the decode batch (a request with n choices holds n)',
      registers,
    }),
    requests: new Counter({
      name: 'seedflow_serve_requests_total',
      help: 'Answered requests by endpoint and HTTP status',
      labelNames: ['endpoint', 'status'],
      registers,
    }),
    promptTokens: new Counter({
      name: 'seedflow_serve_prompt_tokens_total',
      help: 'Prompt tokens prefilled',
      registers,
    }),
    generatedTokens,
    decodeSteps: new Counter({
      name: 'seedflow_serve_decode_steps_total',
      help: 'Decode steps run (each samples one token for every sequence in the batch)',
      registers,
    }),
    stepRows: new Counter({
      name: 'seedflow_serve_step_rows_total',
      help: 'Sum over decode steps of the sequences each sampled for (÷ steps = mean occupancy)',
      registers,
    }),
    prefills: new Counter({
      name: 'seedflow_serve_prefills_total',
      help: 'Prefill runs (sequences joining the batch together share one)',
      registers,
    }),
    stepOccupancy: new Histogram({
      name: 'seedflow_serve_step_occupancy',
      help: 'Sequences sampled per decode step',
      buckets: [1, 2, 4, 8, 16, 32, 64],
      registers,
    }),
    timeToFirstToken: new Histogram({
      name: 'seedflow_serve_time_to_first_token_seconds',
      help: "From a request's arrival to its first sampled token",
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    sampled(n: number) {
      const t = now()
      window.push({ at: t, n })
      trim(t)
      generatedTokens.inc(n)
    },
  }
}
