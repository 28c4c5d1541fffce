// The only module that imports onnxruntime-node. Two engines share one interface: `createLocalEngine` runs
// models on the calling thread (a run blocks it: onnxruntime-node's run is a synchronous native call), and
// `createWorkerEngine` runs them in a worker thread so the caller's event loop stays free.
import { createHash } from 'node:crypto'
import { availableParallelism } from 'node:os'
import { InferenceSession, listSupportedBackends, Tensor } from 'onnxruntime-node'
import { createBuilder } from './builder.ts'
import { CpuFallbackError, guarded } from './cpu-fallback.ts'
import { type DType, TYPED_ARRAY } from './dtype.ts'
import { EngineRuntimeError, messageOf } from './errors.ts'
import { type ExecutionProvider, ortProvider } from './execution-provider.ts'
import type { Engine, KeptFeeds, ModelHandle } from './interface.ts'
import { Graph } from './ir.ts'
import { checkedRun, firstRows, heldBy, keptTensor, withKept, writeSlices } from './kept.ts'
import { encodeModel } from './onnx.ts'
import { type MissingLibrary, missingProviderLibrary } from './provider-libraries.ts'
import { SessionTable } from './session-table.ts'
import type { Feeds, Fetches, TensorData } from './tensor.ts'
import { startThread } from './thread.ts'

// onnxruntime-node 1.30's Linux build carries ORT's 1DS telemetry (the Microsoft Applications Telemetry SDK):
// at the first session it starts an uploader and opens an empty /tmp/mat-debug-<pid>.log that stays behind.
// ORT reads its opt-out when it first initializes, so it is set here, before any session, in the process
// environment that worker threads and child processes inherit. An operator's own value wins.
process.env.ORT_DISABLE_TELEMETRY ??= '1'

export interface RuntimeConfig {
  /** ORT intra-op threads; default: the number of cores. One thread makes runs bit-reproducible. */
  threads?: number
  /** In order of preference; default ['cpu']. A CUDA worker passes [{ name: 'cuda' }, 'cpu']. */
  executionProviders?: readonly ExecutionProvider[]
  graphOptimizationLevel?: 'disabled' | 'basic' | 'extended' | 'all'
  /** Write ORT's per-node profile (Chrome trace JSON) to files starting with this prefix. */
  profilePrefix?: string
  /** Sessions kept, least recently used evicted first (default 32). */
  maxSessions?: number
  /**
   * ORT's CPU memory arena (default true). The arena keeps its peak for the session's life and grows in
   * powers of two; without it, tensors go back to malloc at once (set MALLOC_MMAP_THRESHOLD_=65536 in the
   * process environment so that glibc hands large blocks back to the system: docs/benchmarks.md §6.5).
   */
  memoryArena?: boolean
  /**
   * Nodes a device provider (the first of `executionProviders`, when not the CPU) leaves on the CPU: 'refuse'
   * (default) fails `load` with a CpuFallbackError naming every one that is not shape computation
   * (engine/cpu-fallback.ts); 'allow' lets ORT place them silently (a measurement that wants the fallback's cost).
   */
  cpuFallback?: 'refuse' | 'allow'
}

export type { Engine, KeptFeeds, KeptWrite, ModelHandle, RunOptions } from './interface.ts'

export function modelId(model: Uint8Array): string {
  return createHash('sha256').update(model).digest('hex')
}

export function resolvedConfig(
  config: RuntimeConfig = {},
): Required<Omit<RuntimeConfig, 'profilePrefix'>> & Pick<RuntimeConfig, 'profilePrefix'> {
  const threads = config.threads ?? availableParallelism()
  if (!Number.isInteger(threads) || threads < 1)
    throw new EngineRuntimeError(`threads must be a positive integer, got ${threads}`)
  return {
    threads,
    executionProviders: config.executionProviders ?? ['cpu'],
    graphOptimizationLevel: config.graphOptimizationLevel ?? 'all',
    maxSessions: config.maxSessions ?? 32,
    memoryArena: config.memoryArena ?? true,
    cpuFallback: config.cpuFallback ?? 'refuse',
    ...(config.profilePrefix ? { profilePrefix: config.profilePrefix } : {}),
  }
}

/** Runs models on the calling thread. */
export function createLocalEngine(config: RuntimeConfig = {}): Engine {
  const cfg = resolvedConfig(config)
  const sessions = new SessionTable<InferenceSession>(cfg.maxSessions, (_, evicted) => {
    void evicted.then((e) => e.release()).catch(() => undefined)
  })
  const kept = new Map<number, Feeds>()
  let nextKept = 0
  const keep = (feeds: Feeds): KeptFeeds => {
    const id = nextKept++
    kept.set(id, { ...feeds })
    return { id, names: Object.keys(feeds) }
  }

  return {
    async load(model) {
      const id = model instanceof Uint8Array ? modelId(model) : model.id
      const s = sessions.acquire(id, () => {
        const source = model instanceof Uint8Array ? model : model.path
        const creating = InferenceSession.create(source as string, {
          intraOpNumThreads: cfg.threads,
          interOpNumThreads: 1,
          executionMode: 'sequential',
          graphOptimizationLevel: cfg.graphOptimizationLevel,
          executionProviders: cfg.executionProviders.map(ortProvider),
          logSeverityLevel: 3,
          enableCpuMemArena: cfg.memoryArena,
          ...(cfg.profilePrefix ? { enableProfiling: true, profileFilePrefix: cfg.profilePrefix } : {}),
        })
        return Promise.all([creating, guarded(model, id, cfg)])
          .then(([session]) => session)
          .catch((error: unknown) => {
            void creating.then((made) => made.release()).catch(() => undefined)
            if (error instanceof CpuFallbackError) throw error
            throw new EngineRuntimeError(`cannot create a session for model ${id.slice(0, 12)}: ${messageOf(error)}`)
          })
      })
      const ready = await s
      return { id, inputNames: [...ready.inputNames], outputNames: [...ready.outputNames] }
    },

    async run(model, given, options = {}) {
      const feeds = withKept(given, options.kept, kept, firstRows)
      const s = await sessions.get(model.id)
      const { fetches, inPlace, writes } = checkedRun(model.id, s, given, feeds, options)
      const ortFeeds: Record<string, Tensor> = {}
      for (const [name, t] of Object.entries(feeds)) ortFeeds[name] = new Tensor(t.dtype, t.data, [...t.dims])
      const ortFetches: Record<string, Tensor | null> = {}
      for (const name of fetches) {
        const feed = inPlace[name]
        const t = feed === undefined ? undefined : (feeds[feed] as TensorData)
        ortFetches[name] = t ? new Tensor(t.dtype, t.data, [...t.dims]) : null
      }
      let out: InferenceSession.ReturnType
      try {
        out = await s.run(ortFeeds, ortFetches)
      } catch (error) {
        throw new EngineRuntimeError(`model ${model.id.slice(0, 12)} run failed: ${messageOf(error)}`)
      }
      const result: Fetches = {}
      for (const name of fetches) {
        const t = out[name]!
        const data: TensorData = { dtype: t.type as DType, dims: [...t.dims], data: t.data as TensorData['data'] }
        const write = writes[name]
        if (write) writeSlices(data, keptTensor(kept, write), write, name)
        else if (!(name in inPlace)) result[name] = data
        t.dispose?.()
      }
      return result
    },

    keep: async (feeds) => keep(feeds),

    async allocate(shapes) {
      const feeds: Feeds = {}
      for (const [name, { dtype, dims }] of Object.entries(shapes))
        feeds[name] = { dtype, dims: [...dims], data: new TYPED_ARRAY[dtype](dims.reduce((a, b) => a * b, 1)) }
      return keep(feeds)
    },

    async read(handle, names) {
      const held = heldBy(kept, handle)
      const copies: Feeds = {}
      for (const name of names ?? Object.keys(held)) {
        const t = held[name]
        if (!t) throw new EngineRuntimeError(`kept feeds ${handle.id} hold no tensor ${name}`)
        copies[name] = { dtype: t.dtype, dims: [...t.dims], data: t.data.slice() as TensorData['data'] }
      }
      return copies
    },

    async forget(handle) {
      kept.delete(handle.id)
    },

    async release(model) {
      await (await sessions.release(model.id))?.release()
    },

    async close() {
      const all = sessions.clear()
      kept.clear()
      await Promise.all(all.map(async (s) => (await s.catch(() => undefined))?.release()))
    },
  }
}

/**
 * Runs models in a dedicated worker thread that owns the sessions; the caller's event loop stays free
 * while a model runs. Outputs come back as transferred buffers (no copy).
 */
export function createWorkerEngine(config: RuntimeConfig = {}): Engine {
  const cfg = resolvedConfig(config)
  const thread = startThread(new URL('./runtime-worker.ts', import.meta.url), { config: cfg }, 'engine')
  let closed = false
  const call = async <T>(type: string, payload: unknown, transfer: ArrayBuffer[] = []): Promise<T> => {
    try {
      return await thread.call<T>(type, payload, { transfer })
    } catch (error) {
      const e = error as Error
      throw Object.assign(new EngineRuntimeError(e.message), {
        name: e.name === 'Error' ? 'EngineRuntimeError' : e.name,
      })
    }
  }
  return {
    load: (model) =>
      call<ModelHandle>('load', { model: model instanceof Uint8Array ? model : { path: model.path, id: model.id } }),
    run(model, feeds, options = {}) {
      const { transfer, ...rest } = options
      return call<Fetches>('run', { model, feeds, options: rest }, transfer ? transferList(Object.values(feeds)) : [])
    },
    keep: (feeds) => call<KeptFeeds>('keep', { feeds }),
    read: (kept, names) => call<Feeds>('read', { kept, names }),
    allocate: (shapes) => call<KeptFeeds>('allocate', { shapes }),
    forget: (kept) => call<void>('forget', { kept }),
    release: (model) => call<void>('release', { model }),
    async close() {
      if (closed) return
      closed = true
      await call<void>('close', {})
      await thread.terminate()
    },
  }
}

/** The distinct, transferable buffers under these tensors. */
export function transferList(tensors: readonly TensorData[]): ArrayBuffer[] {
  const buffers = new Set<ArrayBuffer>()
  for (const t of tensors) if (t.data.buffer instanceof ArrayBuffer) buffers.add(t.data.buffer)
  return [...buffers]
}

/**
 * The feeds of a run with the kept tensors it names (the first `rows` entries of each where the handle says);
 * a name both kept and fed is refused.
 */

/**
 * Checks that this onnxruntime-node build can run a session on `provider` (a one-node model, created and
 * released), so a worker asked for CUDA fails at start with the reason instead of at its first model: the first
 * library the loader could not find (`ProviderUnavailableError.missing`), else ORT's own error (no device).
 */
export async function probeExecutionProvider(provider: ExecutionProvider): Promise<void> {
  if (provider === 'cpu') return
  const builds = listSupportedBackends().map((b) => b.name)
  if (!builds.includes(provider.name))
    throw new EngineRuntimeError(
      `this onnxruntime-node build has no ${provider.name} execution provider (it has ${builds.join(', ')})`,
    )
  const graph = new Graph('probe')
  const op = createBuilder(graph)
  op.output(op.Identity(op.input('x', 'float32', [1])), 'y')
  try {
    const session = await InferenceSession.create(encodeModel(graph), {
      executionProviders: [ortProvider(provider)],
      logSeverityLevel: 4,
    })
    await session.release()
  } catch (error) {
    const missing = provider.name === 'cuda' ? missingProviderLibrary(provider.name) : undefined
    const why = missing
      ? `${missing.library} cannot be loaded (${MISSING_KIND[missing.kind]}; ORT library ${missing.ortLibrary})`
      : messageOf(error).split('\n')[0]
    throw new ProviderUnavailableError(
      `the ${provider.name} execution provider${provider.name === 'cuda' ? ` (device ${provider.deviceId ?? 0})` : ''} is not available: ${why}`,
      missing,
    )
  }
}

const MISSING_KIND = {
  provider: 'the provider library itself',
  runtime: 'a CUDA 13 runtime library the provider needs',
  driver: "the NVIDIA driver's",
} as const

/** A provider that cannot run here; `missing`: the first library the loader could not find, if that is why. */
export class ProviderUnavailableError extends EngineRuntimeError {
  override name = 'ProviderUnavailableError'
  constructor(
    message: string,
    readonly missing?: MissingLibrary,
  ) {
    super(message)
  }
}
