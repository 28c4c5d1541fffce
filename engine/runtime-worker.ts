// Worker-thread side of createWorkerEngine: owns a local engine and answers one message at a time.
import { parentPort, workerData } from 'node:worker_threads'
import { createLocalEngine, type ModelHandle, type RuntimeConfig, transferList } from './runtime.ts'
import type { Feeds } from './tensor.ts'

type Request =
  | { id: number; type: 'load'; model: Uint8Array }
  | { id: number; type: 'run'; model: ModelHandle; feeds: Feeds; fetches?: string[] }
  | { id: number; type: 'release'; model: ModelHandle }
  | { id: number; type: 'close' }

const engine = createLocalEngine((workerData as { config: RuntimeConfig }).config)
const port = parentPort!

async function handle(req: Request): Promise<{ value: unknown; transfer: ArrayBuffer[] }> {
  switch (req.type) {
    case 'load':
      return { value: await engine.load(req.model), transfer: [] }
    case 'run': {
      const out = await engine.run(req.model, req.feeds, req.fetches ? { fetches: req.fetches } : {})
      // outputs are handed over, not copied; a buffer ORT still owns is copied first
      for (const t of Object.values(out))
        if (!(t.data.buffer instanceof ArrayBuffer)) t.data = t.data.slice() as typeof t.data
      return { value: out, transfer: transferList(Object.values(out)) }
    }
    case 'release':
      return { value: await engine.release(req.model), transfer: [] }
    case 'close':
      return { value: await engine.close(), transfer: [] }
  }
}

let queue = Promise.resolve()
port.on('message', (req: Request) => {
  queue = queue.then(async () => {
    try {
      const { value, transfer } = await handle(req)
      port.postMessage({ id: req.id, ok: true, value }, transfer)
    } catch (error) {
      const e = error instanceof Error ? error : new Error(String(error))
      port.postMessage({ id: req.id, ok: false, error: { name: e.name, message: e.message } })
    }
  })
})
