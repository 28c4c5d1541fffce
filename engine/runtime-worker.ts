// Worker-thread side of createWorkerEngine: owns a local engine and answers one request at a time.
import { workerData } from 'node:worker_threads'
import { createLocalEngine, type ModelHandle, type RuntimeConfig, transferList } from './runtime.ts'
import type { Feeds, Fetches } from './tensor.ts'
import { serveThread } from './thread.ts'

const engine = createLocalEngine((workerData as { config: RuntimeConfig }).config)

serveThread(
  {
    load: async (req: { model: Uint8Array }) => engine.load(req.model),
    run: async (req: { model: ModelHandle; feeds: Feeds; fetches?: string[]; outputs?: Fetches }) => {
      const out = await engine.run(req.model, req.feeds, {
        ...(req.fetches ? { fetches: req.fetches } : {}),
        ...(req.outputs ? { outputs: req.outputs } : {}),
      })
      // outputs are handed over, not copied; a buffer ORT still owns is copied first
      for (const t of Object.values(out))
        if (!(t.data.buffer instanceof ArrayBuffer)) t.data = t.data.slice() as typeof t.data
      return out
    },
    release: async (req: { model: ModelHandle }) => engine.release(req.model),
    close: async () => engine.close(),
  },
  (type, value) => (type === 'run' ? transferList(Object.values(value as Fetches)) : []),
)
