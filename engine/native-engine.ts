// The native engine: the Engine interface over ONNX Runtime's C API with IoBinding (native/seedflow-ort, a Rust
// N-API addon built by infra/install-native.sh), so that kept tensors live in memory the engine owns and a run
// binds them, its in-place outputs and its written slices there: nothing kept crosses into JS. This side keeps the
// names and shapes (the same checks as the other engines: engine/kept.ts); the addon keeps the tensors. Loads and
// runs go to libuv's thread pool, so the event loop stays free as with the worker engine.
//
// So far it runs on the CPU provider only: device memory for kept tensors (CUDA, where this pays) is not built,
// and a device provider is refused by name (docs/design.md §14).
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { type DType, TYPED_ARRAY } from './dtype.ts'
import { EngineRuntimeError, messageOf } from './errors.ts'
import type { Engine, KeptFeeds, ModelHandle } from './interface.ts'
import { checkedRun, checkRows, heldBy, keptTensor, lastReference, type Shaped, withKept } from './kept.ts'
import { loadedOrtLibrary } from './provider-libraries.ts'
import { modelId, type RuntimeConfig, resolvedConfig } from './runtime.ts'
import type { Feeds, Fetches, TensorData } from './tensor.ts'

export interface NativeConfig extends RuntimeConfig {
  /** The built addon (`seedflow_ort.node`: infra/native.ts's ensureNativeAddon). */
  addon: string
  /** The ONNX Runtime library to open; default: the one this process loaded, else onnxruntime-node's. */
  library?: string
}

interface TensorArg {
  name: string
  dtype: string
  dims: number[]
  data: Buffer
}

interface NativeAddon {
  NativeEngine: new (options: {
    library: string
    threads: number
    optimization: string
    memoryArena: boolean
  }) => {
    readonly version: string
    load(id: string, bytes: Buffer | null, path: string | null): Promise<{ inputs: string[]; outputs: string[] }>
    release(id: string): void
    keep(tensors: TensorArg[]): number
    allocate(shapes: Omit<TensorArg, 'data'>[]): number
    read(id: number, names: string[]): TensorArg[]
    forget(id: number): void
    run(
      model: string,
      feeds: TensorArg[],
      kept: { id: number; rows?: number }[],
      fetches: string[],
      inPlace: { output: string; feed: string }[],
      writes: { output: string; kept: number; name: string; axis: number; slices: number[][] }[],
    ): Promise<TensorArg[]>
    close(): void
  }
}

/** The ONNX Runtime library of onnxruntime-node's package (what its binding opens). */
export function onnxruntimeNodeLibrary(): string {
  const pkg = dirname(createRequire(import.meta.url).resolve('onnxruntime-node/package.json'))
  return join(pkg, 'bin', 'napi-v6', process.platform, process.arch, 'libonnxruntime.so.1')
}

const asBuffer = (t: TensorData): Buffer =>
  Buffer.from(t.data.buffer as ArrayBuffer, t.data.byteOffset, t.data.byteLength)

/** A tensor from the addon as the engine's typed array (copied when the bytes are not aligned for it). */
function fromNative(t: TensorArg): TensorData {
  const Typed = TYPED_ARRAY[t.dtype as DType]
  const size = Typed.BYTES_PER_ELEMENT
  const bytes = t.data.byteOffset % size === 0 ? t.data : Buffer.from(t.data)
  const data = new Typed(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.byteLength / size) as TensorData['data']
  return { dtype: t.dtype as DType, dims: [...t.dims], data }
}

const arg = (name: string, t: TensorData): TensorArg => ({ name, dtype: t.dtype, dims: [...t.dims], data: asBuffer(t) })

export function createNativeEngine(config: NativeConfig): Engine {
  const cfg = resolvedConfig(config)
  const device = cfg.executionProviders.find((p) => p !== 'cpu')
  if (device)
    throw new EngineRuntimeError(
      `the native engine runs on the CPU provider only so far (device memory is not built), not ${JSON.stringify(device)}`,
    )
  const addon = createRequire(import.meta.url)(config.addon) as NativeAddon
  const native = new addon.NativeEngine({
    library: config.library ?? loadedOrtLibrary() ?? onnxruntimeNodeLibrary(),
    threads: cfg.threads,
    optimization: cfg.graphOptimizationLevel,
    memoryArena: cfg.memoryArena,
  })
  const sessions = new Map<string, Promise<{ inputNames: string[]; outputNames: string[] }>>()
  const refs = new Map<string, number>()
  const kept = new Map<number, Record<string, Shaped>>()
  const rowsOf = (t: Shaped, rows: number, name: string): Shaped => {
    checkRows(t.dims, rows, name)
    return { dtype: t.dtype, dims: [rows, ...t.dims.slice(1)] }
  }
  const remember = (id: number, shapes: Record<string, Shaped>): KeptFeeds => {
    kept.set(id, shapes)
    return { id, names: Object.keys(shapes) }
  }
  const loaded = (id: string) => {
    const s = sessions.get(id)
    if (!s) throw new EngineRuntimeError(`model ${id.slice(0, 12)} is not loaded in this engine`)
    return s
  }
  const evict = (id: string) => {
    sessions.delete(id)
    refs.delete(id)
    native.release(id)
  }

  return {
    async load(model) {
      const id = model instanceof Uint8Array ? modelId(model) : model.id
      refs.set(id, (refs.get(id) ?? 0) + 1)
      let s = sessions.get(id)
      if (!s) {
        const bytes =
          model instanceof Uint8Array
            ? Buffer.from(model.buffer as ArrayBuffer, model.byteOffset, model.byteLength)
            : null
        s = native
          .load(id, bytes, model instanceof Uint8Array ? null : model.path)
          .then(({ inputs, outputs }) => ({ inputNames: inputs, outputNames: outputs }))
          .catch((error: unknown) => {
            sessions.delete(id)
            throw new EngineRuntimeError(`cannot create a session for model ${id.slice(0, 12)}: ${messageOf(error)}`)
          })
        sessions.set(id, s)
        while (sessions.size > cfg.maxSessions) {
          const ids = [...sessions.keys()]
          evict(ids.find((i) => !refs.get(i)) ?? (ids[0] as string))
        }
      }
      const ready = await s
      return { id, inputNames: [...ready.inputNames], outputNames: [...ready.outputNames] }
    },

    async run(model: ModelHandle, given: Feeds, options = {}): Promise<Fetches> {
      const session = await loaded(model.id)
      const feeds = withKept<Shaped>(given, options.kept, kept, rowsOf)
      const { fetches, inPlace, writes } = checkedRun(model.id, session, given, feeds, options)
      const handles = options.kept === undefined ? [] : 'id' in options.kept ? [options.kept] : options.kept
      for (const write of Object.values(writes)) keptTensor(kept, write)
      let outputs: TensorArg[]
      try {
        outputs = await native.run(
          model.id,
          Object.entries(given).map(([name, t]) => arg(name, t)),
          handles.map((h) => (h.rows === undefined ? { id: h.id } : { id: h.id, rows: h.rows })),
          [...fetches],
          Object.entries(inPlace).map(([output, feed]) => ({ output, feed })),
          Object.entries(writes).map(([output, w]) => ({
            output,
            kept: w.kept.id,
            name: w.name,
            axis: w.axis,
            slices: w.slices.map((s) => [s.from, s.row, s.at]),
          })),
        )
      } catch (error) {
        const message = messageOf(error)
        throw new EngineRuntimeError(
          message.startsWith('output ') ? message : `model ${model.id.slice(0, 12)} run failed: ${message}`,
        )
      }
      const result: Fetches = {}
      for (const t of outputs) result[t.name] = fromNative(t)
      return result
    },

    async keep(feeds) {
      const id = native.keep(Object.entries(feeds).map(([name, t]) => arg(name, t)))
      return remember(
        id,
        Object.fromEntries(Object.entries(feeds).map(([n, t]) => [n, { dtype: t.dtype, dims: [...t.dims] }])),
      )
    },

    async allocate(shapes) {
      const list = Object.entries(shapes).map(([name, s]) => ({ name, dtype: s.dtype, dims: [...s.dims] }))
      return remember(
        native.allocate(list),
        Object.fromEntries(list.map((s) => [s.name, { dtype: s.dtype, dims: s.dims }])),
      )
    },

    async read(handle, names) {
      const held = heldBy(kept, handle)
      const wanted = names ?? Object.keys(held)
      for (const name of wanted)
        if (!held[name]) throw new EngineRuntimeError(`kept feeds ${handle.id} hold no tensor ${name}`)
      const copies: Feeds = {}
      for (const t of native.read(handle.id, [...wanted])) copies[t.name] = fromNative(t)
      return copies
    },

    async forget(handle) {
      kept.delete(handle.id)
      native.forget(handle.id)
    },

    async release(model) {
      if (lastReference(refs, model.id)) evict(model.id)
    },

    async close() {
      sessions.clear()
      refs.clear()
      kept.clear()
      native.close()
    },
  }
}
