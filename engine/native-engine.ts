// The native engine: the Engine interface over ONNX Runtime's C API with IoBinding (native/seedflow-ort, a Rust
// N-API addon built by infra/install-native.sh), so that kept tensors live in memory the engine owns and a run
// binds them, its in-place outputs and its written slices there: nothing kept crosses into JS. This side keeps the
// names and shapes (the same checks as the other engines: engine/kept.ts); the addon keeps the tensors. Loads and
// runs go to libuv's thread pool, so the event loop stays free as with the worker engine.
//
// With a device provider (CUDA, or WebGPU, which the tests run over software Vulkan), kept tensors live in the
// device's memory: copied there and back by one-node Identity sessions, their slices written by a ScatterND session
// in place (ORT's C API copies between devices only for plugin providers); feeds and fetched outputs cross per run.
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { createBuilder } from './builder.ts'
import { CpuFallbackError, guarded } from './cpu-fallback.ts'
import { type DType, TYPED_ARRAY } from './dtype.ts'
import { EngineRuntimeError, messageOf } from './errors.ts'
import type { Engine, KeptFeeds, ModelHandle } from './interface.ts'
import { Graph } from './ir.ts'
import { checkedRun, checkRows, heldBy, keptTensor, type Shaped, withKept } from './kept.ts'
import { encodeModel } from './onnx.ts'
import { loadedOrtLibrary } from './provider-libraries.ts'
import { modelId, type RuntimeConfig, resolvedConfig } from './runtime.ts'
import { SessionTable } from './session-table.ts'
import type { Feeds, Fetches, TensorData } from './tensor.ts'

export interface NativeConfig extends RuntimeConfig {
  /** The built addon (`seedflow_ort.node`: infra/native.ts's ensureNativeAddon). */
  addon: string
  /** The ONNX Runtime library to open; default: the one this process loaded, else onnxruntime-node's. */
  library?: string
  /** CUDA: TF32 for float32 MatMuls (ORT's default, true); false is what NVIDIA_TF32_OVERRIDE=0 does process-wide. */
  tf32?: boolean
  /** CUDA: the provider's memory arena limit in bytes. */
  memoryLimit?: number
}

const DTYPES = Object.keys(TYPED_ARRAY) as DType[]

/** Identity over a vector of `dtype`: the device's copy to or from the host. */
function copyModel(dtype: DType): Uint8Array {
  const graph = new Graph(`copy-${dtype}`)
  const op = createBuilder(graph)
  op.output(op.Identity(op.input('x', dtype, ['n'])), 'y')
  return encodeModel(graph)
}

/**
 * Writes slices of `source` (an output) into `target` (a kept tensor) of this element type, rank and axis, in
 * place: the rows `froms` of the source, as one update per (slice, outer position, column), scattered at `indices`
 * (row, outer position, column) by ScatterND (see KeptWrite).
 */
function writeModel(dtype: DType, rank: number, axis: number): Uint8Array {
  const graph = new Graph(`write-${dtype}-${rank}-${axis}`)
  const op = createBuilder(graph)
  const dims = (p: string) => Array.from({ length: rank }, (_, i) => `${p}${i}`)
  const target = op.input('target', dtype, dims('t'))
  const source = op.input('source', dtype, dims('s'))
  const froms = op.input('froms', 'int64', ['S'])
  const indices = op.input('indices', 'int64', ['N', axis + 1])
  const inner = op.Slice(op.Shape(target), [axis + 1], [rank])
  const updates = op.Reshape(op.Gather(source, froms, 0), op.Concat([op.ints([-1]), inner], 0))
  op.output(op.ScatterND(target, indices, updates), 'out')
  return encodeModel(graph)
}

interface TensorArg {
  name: string
  dtype: string
  dims: number[]
  data: Buffer
}

interface NativeOptions {
  library: string
  threads: number
  optimization: string
  memoryArena: boolean
  device?: { name: string; deviceId?: number; tf32?: boolean; memoryLimit?: number }
  copyModels?: { key: string; bytes: Buffer }[]
}

interface NativeAddon {
  NativeEngine: new (
    options: NativeOptions,
  ) => {
    readonly version: string
    readonly onDevice: boolean
    registerWrite(key: string, bytes: Buffer): void
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
      writes: { graph?: string; output: string; kept: number; name: string; axis: number; slices: number[][] }[],
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
  const addon = createRequire(import.meta.url)(config.addon) as NativeAddon
  const native = new addon.NativeEngine({
    library: config.library ?? loadedOrtLibrary() ?? onnxruntimeNodeLibrary(),
    threads: cfg.threads,
    optimization: cfg.graphOptimizationLevel,
    memoryArena: cfg.memoryArena,
    ...(device
      ? {
          device: {
            name: device.name,
            ...(device.name === 'cuda' ? { deviceId: device.deviceId ?? 0 } : {}),
            ...(config.tf32 === undefined ? {} : { tf32: config.tf32 }),
            ...(config.memoryLimit === undefined ? {} : { memoryLimit: config.memoryLimit }),
          },
          copyModels: DTYPES.map((dtype) => ({ key: dtype, bytes: Buffer.from(copyModel(dtype)) })),
        }
      : {}),
  })
  const writeGraphs = new Set<string>()
  /** The key of the write graph for this kept tensor and axis, registered on first use (device engines). */
  const writeGraph = (t: Shaped, axis: number): string | undefined => {
    if (!device) return undefined
    const key = `${t.dtype}/${t.dims.length}/${axis}`
    if (!writeGraphs.has(key)) {
      native.registerWrite(key, Buffer.from(writeModel(t.dtype, t.dims.length, axis)))
      writeGraphs.add(key)
    }
    return key
  }
  const sessions = new SessionTable<{ inputNames: string[]; outputNames: string[] }>(cfg.maxSessions, (id) =>
    native.release(id),
  )
  const kept = new Map<number, Record<string, Shaped>>()
  const rowsOf = (t: Shaped, rows: number, name: string): Shaped => {
    checkRows(t.dims, rows, name)
    return { dtype: t.dtype, dims: [rows, ...t.dims.slice(1)] }
  }
  const remember = (id: number, shapes: Record<string, Shaped>): KeptFeeds => {
    kept.set(id, shapes)
    return { id, names: Object.keys(shapes) }
  }
  return {
    async load(model) {
      const id = model instanceof Uint8Array ? modelId(model) : model.id
      const s = sessions.acquire(id, () => {
        const bytes =
          model instanceof Uint8Array
            ? Buffer.from(model.buffer as ArrayBuffer, model.byteOffset, model.byteLength)
            : null
        const path = model instanceof Uint8Array ? null : model.path
        return Promise.all([native.load(id, bytes, path), guarded(model, id, cfg)])
          .then(([{ inputs, outputs }]) => ({ inputNames: inputs, outputNames: outputs }))
          .catch((error: unknown) => {
            native.release(id)
            if (error instanceof CpuFallbackError) throw error
            throw new EngineRuntimeError(`cannot create a session for model ${id.slice(0, 12)}: ${messageOf(error)}`)
          })
      })
      const ready = await s
      return { id, inputNames: [...ready.inputNames], outputNames: [...ready.outputNames] }
    },

    async run(model: ModelHandle, given: Feeds, options = {}): Promise<Fetches> {
      const session = await sessions.get(model.id)
      const feeds = withKept<Shaped>(given, options.kept, kept, rowsOf)
      const { fetches, inPlace, writes } = checkedRun(model.id, session, given, feeds, options)
      const handles = options.kept === undefined ? [] : 'id' in options.kept ? [options.kept] : options.kept
      const graphs = Object.values(writes).map((write) => writeGraph(keptTensor(kept, write), write.axis))
      let outputs: TensorArg[]
      try {
        outputs = await native.run(
          model.id,
          Object.entries(given).map(([name, t]) => arg(name, t)),
          handles.map((h) => (h.rows === undefined ? { id: h.id } : { id: h.id, rows: h.rows })),
          [...fetches],
          Object.entries(inPlace).map(([output, feed]) => ({ output, feed })),
          Object.entries(writes).map(([output, w], i) => ({
            ...(graphs[i] === undefined ? {} : { graph: graphs[i] }),
            output,
            kept: w.kept.id,
            name: w.name,
            axis: w.axis,
            slices: w.slices.map((s) => [s.from, s.row, s.at]),
          })),
        )
      } catch (error) {
        const message = messageOf(error)
        const id = model.id.slice(0, 12)
        throw new EngineRuntimeError(
          message.startsWith('output ')
            ? message
            : message.startsWith('run failed: ')
              ? `model ${id} ${message}`
              : `model ${id} run failed: ${message}`,
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
      if (sessions.release(model.id)) native.release(model.id)
    },

    async close() {
      sessions.clear()
      kept.clear()
      native.close()
    },
  }
}
