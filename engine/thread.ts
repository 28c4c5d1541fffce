// A small RPC over a worker thread, for work that blocks its thread (ORT runs, whole model phases): the caller
// sends typed requests and keeps its event loop free. The worker module calls `serveThread(handlers)`.
import { parentPort, Worker } from 'node:worker_threads'

interface Request {
  id: number
  type: string
  payload: unknown
}

type Reply =
  | { id: number; kind: 'result'; value: unknown }
  | { id: number; kind: 'error'; error: { name: string; message: string; type?: string } }
  | { id: number; kind: 'progress'; value: unknown }

/** A failure inside the thread, with the original error's name (and `type`, for ApplicationFailure mapping). */
export class ThreadError extends Error {
  constructor(
    message: string,
    override readonly name: string,
    readonly type?: string,
  ) {
    super(message)
  }
}

export interface ThreadClient {
  /** Sends one request; `transfer` moves buffers instead of copying them; `onProgress` gets the handler's reports. */
  call<T>(
    type: string,
    payload: unknown,
    options?: { transfer?: ArrayBuffer[]; onProgress?: (value: unknown) => void },
  ): Promise<T>
  terminate(): Promise<void>
}

/**
 * Starts `entry` (a TypeScript module URL) in a worker thread. tsx is registered inside the worker: an
 * `--import` in execArgv is not applied to worker threads on Node 20. The thread does not keep the process
 * alive while no request is pending.
 */
export function startThread(entry: URL, workerData: Record<string, unknown>, what: string): ThreadClient {
  const boot = `const { workerData } = require('node:worker_threads')
import(workerData.tsx).then((tsx) => { tsx.register(); return import(workerData.entry) })`
  const worker = new Worker(boot, {
    eval: true,
    workerData: { ...workerData, entry: entry.href, tsx: import.meta.resolve('tsx/esm/api') },
  })
  worker.unref()
  const pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void; progress?: (v: unknown) => void }
  >()
  let nextId = 0
  let dead: Error | undefined

  const failAll = (error: Error) => {
    dead = error
    for (const p of pending.values()) p.reject(error)
    pending.clear()
  }
  worker.on('message', (reply: Reply) => {
    const p = pending.get(reply.id)
    if (!p) return
    if (reply.kind === 'progress') {
      p.progress?.(reply.value)
      return
    }
    pending.delete(reply.id)
    if (pending.size === 0) worker.unref()
    if (reply.kind === 'result') p.resolve(reply.value)
    else p.reject(new ThreadError(reply.error.message, reply.error.name, reply.error.type))
  })
  worker.on('error', (error) => failAll(new ThreadError(`${what} thread failed: ${error.message}`, 'ThreadError')))
  worker.on('exit', (code) => failAll(new ThreadError(`${what} thread exited with code ${code}`, 'ThreadError')))

  return {
    call<T>(
      type: string,
      payload: unknown,
      options: { transfer?: ArrayBuffer[]; onProgress?: (value: unknown) => void } = {},
    ) {
      if (dead) return Promise.reject(dead)
      const id = nextId++
      return new Promise<T>((resolve, reject) => {
        pending.set(id, {
          resolve: resolve as (v: unknown) => void,
          reject,
          ...(options.onProgress ? { progress: options.onProgress } : {}),
        })
        worker.ref()
        worker.postMessage({ id, type, payload } satisfies Request, options.transfer ?? [])
      })
    },
    async terminate() {
      dead ??= new ThreadError(`${what} thread closed`, 'ThreadError')
      await worker.terminate()
    },
  }
}

/** Worker side: answers requests one at a time with `handlers[type]`. Return `{ value, transfer }` to move buffers. */
export function serveThread(
  handlers: Record<string, (payload: never, context: { progress(value: unknown): void }) => Promise<unknown>>,
  transferOf?: (type: string, value: unknown) => ArrayBuffer[],
): void {
  const port = parentPort
  if (!port) throw new Error('serveThread must run inside a worker thread')
  let queue = Promise.resolve()
  port.on('message', (req: Request) => {
    queue = queue.then(async () => {
      try {
        const handler = handlers[req.type]
        if (!handler) throw new Error(`unknown request ${req.type}`)
        const progress = (value: unknown) => port.postMessage({ id: req.id, kind: 'progress', value } satisfies Reply)
        const value = await handler(req.payload as never, { progress })
        port.postMessage({ id: req.id, kind: 'result', value } satisfies Reply, transferOf?.(req.type, value) ?? [])
      } catch (error) {
        const e = error instanceof Error ? error : new Error(String(error))
        const type = (e as { type?: string }).type
        port.postMessage({
          id: req.id,
          kind: 'error',
          error: { name: e.name, message: e.message, ...(type ? { type } : {}) },
        } satisfies Reply)
      }
    })
  })
}
