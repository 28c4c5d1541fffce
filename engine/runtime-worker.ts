// Worker-thread side of createWorkerEngine: owns a local engine and answers one request at a time.
import { workerData } from 'node:worker_threads'
import { createLocalEngine, type KeptFeeds, type ModelHandle, type RuntimeConfig, transferList } from './runtime.ts'
import type { Feeds, Fetches } from './tensor.ts'
import { serveThread } from './thread.ts'

const engine = createLocalEngine((workerData as { config: RuntimeConfig }).config)

serveThread(
  {
    load: async (req: { model: Uint8Array }) => engine.load(req.model),
    run: async (req: {
      model: ModelHandle
      feeds: Feeds
      fetches?: string[]
      outputs?: Fetches
      lend?: string[]
      kept?: KeptFeeds
    }) => {
      const out = await engine.run(req.model, req.feeds, {
        ...(req.fetches ? { fetches: req.fetches } : {}),
        ...(req.outputs ? { outputs: req.outputs } : {}),
        ...(req.lend ? { lend: req.lend } : {}),
        ...(req.kept ? { kept: req.kept } : {}),
      })
      // outputs (and lent feeds) are handed over, not copied; a buffer ORT still owns is copied first
      for (const t of Object.values(out))
        if (!(t.data.buffer instanceof ArrayBuffer)) t.data = t.data.slice() as typeof t.data
      return out
    },
    keep: async (req: { feeds: Feeds }) => engine.keep(req.feeds),
    forget: async (req: { kept: KeptFeeds }) => engine.forget(req.kept),
    release: async (req: { model: ModelHandle }) => engine.release(req.model),
    close: async () => engine.close(),
  },
  (type, value) => (type === 'run' ? transferList(Object.values(value as Fetches)) : []),
)
