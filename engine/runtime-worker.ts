// Worker-thread side of createWorkerEngine: owns a local engine and answers one request at a time.
import { workerData } from 'node:worker_threads'
import type { DType } from './dtype.ts'
import type { ModelFile } from './model-files.ts'
import {
  createLocalEngine,
  type KeptFeeds,
  type ModelHandle,
  type RunOptions,
  type RuntimeConfig,
  transferList,
} from './runtime.ts'
import type { Feeds, Fetches } from './tensor.ts'
import { serveThread } from './thread.ts'

const engine = createLocalEngine((workerData as { config: RuntimeConfig }).config)

serveThread(
  {
    load: async (req: { model: Uint8Array | ModelFile }) => engine.load(req.model),
    run: async (req: { model: ModelHandle; feeds: Feeds; options: RunOptions }) => {
      const out = await engine.run(req.model, req.feeds, req.options)
      // outputs are handed over, not copied; a buffer ORT still owns is copied first
      for (const t of Object.values(out))
        if (!(t.data.buffer instanceof ArrayBuffer)) t.data = t.data.slice() as typeof t.data
      return out
    },
    keep: async (req: { feeds: Feeds }) => engine.keep(req.feeds),
    read: async (req: { kept: KeptFeeds; names?: string[] }) => engine.read(req.kept, req.names),
    allocate: async (req: { shapes: Record<string, { dtype: DType; dims: number[] }> }) => engine.allocate(req.shapes),
    forget: async (req: { kept: KeptFeeds }) => engine.forget(req.kept),
    release: async (req: { model: ModelHandle }) => engine.release(req.model),
    close: async () => engine.close(),
  },
  (type, value) => (type === 'run' || type === 'read' ? transferList(Object.values(value as Fetches)) : []),
)
