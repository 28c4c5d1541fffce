// An engine that counts what crosses into and out of the engine it wraps: the bytes of every feed, kept tensor,
// model and fetch. What a benchmark reports as "bytes sent per step" and what a test checks ("a LoRA decode
// feeds no base weight") both read these counters, so they measure the calls the product makes; a worker's
// profile (workers/profile.ts) reads their per-model wall times.
import type { Engine, ModelHandle } from './runtime.ts'
import type { Feeds, TensorData } from './tensor.ts'

/** Counters since the engine was made (or `reset`). */
export interface EngineTraffic {
  runs: number
  /** Bytes of the feeds that runs sent (kept tensors are not sent, so not counted). */
  fedBytes: number
  /** Bytes of the tensors `keep` sent. */
  keptBytes: number
  /** Bytes of the model graphs `load` sent (initializers baked into them included; a model on disk is not sent). */
  loadedBytes: number
  /** Bytes of the outputs that runs returned. */
  fetchedBytes: number
  /** Bytes of the kept tensors `read` returned. */
  readBytes: number
  /** Every feed name a run sent, with how many runs sent it. */
  fedNames: Map<string, number>
  /** Per tag (`MeterOptions.tag`) and model: runs, wall time and bytes, for a profile of where runs go. */
  models: Map<string, ModelTraffic>
}

/** The runs of one model under one tag. */
export interface ModelTraffic {
  tag: string
  /** The model's id (sha256 of its bytes, or of its file). */
  model: string
  /** Its output names: what kind of graph it is (a train step's `loss`, a decode step's `present.*`). */
  outputs: readonly string[]
  runs: number
  /** Wall milliseconds of its runs as the caller waited for them (a worker engine's queue included). */
  ms: number
  fedBytes: number
  fetchedBytes: number
}

export interface MeterOptions {
  /** What the calling code is doing now (an activity's type): runs are also counted per tag and model. */
  tag?: () => string | undefined
}

export interface MeteredEngine extends Engine {
  readonly traffic: EngineTraffic
  /** Zeroes the counters. */
  reset(): void
}

const zero = (): EngineTraffic => ({
  runs: 0,
  fedBytes: 0,
  keptBytes: 0,
  loadedBytes: 0,
  fetchedBytes: 0,
  readBytes: 0,
  fedNames: new Map(),
  models: new Map(),
})

function bytesOf(tensors: Feeds): number {
  return Object.values(tensors).reduce((n, t: TensorData) => n + t.data.byteLength, 0)
}

/** Wraps `engine`; every call goes through unchanged and is counted. */
export function meteredEngine(engine: Engine, options: MeterOptions = {}): MeteredEngine {
  let traffic = zero()
  const modelTraffic = (model: ModelHandle): ModelTraffic => {
    const tag = options.tag?.() ?? ''
    const key = `${tag}\u0000${model.id}`
    let t = traffic.models.get(key)
    if (!t) {
      t = { tag, model: model.id, outputs: model.outputNames, runs: 0, ms: 0, fedBytes: 0, fetchedBytes: 0 }
      traffic.models.set(key, t)
    }
    return t
  }
  return {
    get traffic() {
      return traffic
    },
    reset() {
      traffic = zero()
    },
    async load(model) {
      if (model instanceof Uint8Array) traffic.loadedBytes += model.byteLength
      return engine.load(model)
    },
    async run(model, feeds, runOptions) {
      const fed = bytesOf(feeds)
      traffic.runs++
      traffic.fedBytes += fed
      for (const name of Object.keys(feeds)) traffic.fedNames.set(name, (traffic.fedNames.get(name) ?? 0) + 1)
      const per = modelTraffic(model)
      const started = performance.now()
      const out = await engine.run(model, feeds, runOptions)
      const fetched = bytesOf(out)
      traffic.fetchedBytes += fetched
      per.runs++
      per.ms += performance.now() - started
      per.fedBytes += fed
      per.fetchedBytes += fetched
      return out
    },
    async keep(feeds) {
      traffic.keptBytes += bytesOf(feeds)
      return engine.keep(feeds)
    },
    async read(kept, names) {
      const out = await engine.read(kept, names)
      traffic.readBytes += bytesOf(out)
      return out
    },
    allocate: (shapes) => engine.allocate(shapes),
    forget: (kept) => engine.forget(kept),
    release: (model) => engine.release(model),
    close: () => engine.close(),
  }
}
