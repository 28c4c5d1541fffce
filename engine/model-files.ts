// A model too large for one protobuf (2 GB): its graph in `model.onnx` and its initializers in `model.data` beside
// it (ONNX external data), written tensor by tensor so no copy of the whole model is made in memory. An engine
// loads it by path (`Engine.load({ path, id })`); the id is the sha256 of the graph's bytes and of every tensor's,
// so identical models share a session as byte models do.
import { createHash } from 'node:crypto'
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import type { ConstTensor, Graph } from './ir.ts'
import { type EncodeOptions, encodeModel, externalLayout } from './onnx.ts'

/** A model on disk, loaded by path; `id` keys its session as a byte model's sha256 does. */
export interface ModelFile {
  readonly path: string
  readonly id: string
}

const DATA_FILE = 'model.data'

/**
 * Writes `graph` with `initializers` as external data into a new folder under `parent`. `remove` deletes the
 * folder (a session made from it keeps what it read: ORT reads or maps the data at load).
 */
export function writeModelFiles(
  graph: Graph,
  initializers: Record<string, ConstTensor>,
  parent: string,
  options: Omit<EncodeOptions, 'initializers' | 'externalData'> = {},
): ModelFile & { remove(): void } {
  const dir = mkdtempSync(join(parent, 'seedflow-model-'))
  const remove = () => rmSync(dir, { recursive: true, force: true })
  try {
    const bytes = encodeModel(graph, { ...options, initializers, externalData: { location: DATA_FILE } })
    const hash = createHash('sha256').update(bytes)
    const data = openSync(join(dir, DATA_FILE), 'w')
    try {
      for (const { name, offset } of externalLayout(initializers)) {
        const t = (initializers[name] as ConstTensor).data
        const view = new Uint8Array(t.buffer, t.byteOffset, t.byteLength)
        hash.update(name).update(view)
        for (let done = 0; done < view.byteLength; )
          done += writeSync(data, view, done, view.byteLength - done, offset + done)
      }
    } finally {
      closeSync(data)
    }
    const path = join(dir, 'model.onnx')
    const graphFile = openSync(path, 'w')
    try {
      writeSync(graphFile, bytes)
    } finally {
      closeSync(graphFile)
    }
    return { path, id: hash.digest('hex'), remove }
  } catch (error) {
    remove()
    throw error
  }
}
