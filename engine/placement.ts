// Which execution provider ORT gives each node of a session: ORT says it only in its verbose log, at session
// creation ("Node placements", then per provider "Node(s) placed on [EP]. Number of nodes: N" followed by a line
// "  OpType (node name)" per node, or "All nodes placed on [EP]. Number of nodes: N"), and onnxruntime-node
// writes that log to the process's stderr. So a model's placement is read from a child process that creates the
// session at verbose level: what a CUDA worker needs to know about nodes left on the CPU (docs/design.md §14).
import { spawn } from 'node:child_process'
import { rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type ExecutionProvider, ortProvider } from './execution-provider.ts'

let written = 0

export interface Placement {
  /** Nodes per provider name (CUDAExecutionProvider, CPUExecutionProvider). */
  providers: Record<string, { count: number; nodes: { op: string; name: string }[] }>
}

/** The placement in a verbose ORT log (see the file's comment); empty when the log has none. */
export function parsePlacement(log: string): Placement {
  const providers: Placement['providers'] = {}
  let current: { count: number; nodes: { op: string; name: string }[] } | undefined
  for (const line of log.split('\n')) {
    const header = /(Node\(s\)|All nodes) placed on \[(\w+)\]\. Number of nodes: (\d+)/.exec(line)
    if (header) {
      current = { count: Number(header[3]), nodes: [] }
      providers[header[2] as string] = current
      if (header[1] === 'All nodes') current = undefined
      continue
    }
    const node = /VerifyEachNodeIsAssignedToAnEp\]\s{3,}(\w+) \((.*)\)\s*$/.exec(line)
    if (node && current) current.nodes.push({ op: node[1] as string, name: node[2] as string })
    else if (!/VerifyEachNodeIsAssignedToAnEp/.test(line)) current = undefined
  }
  return { providers }
}

/**
 * The placement of `model` (its bytes, or the path of a model file) on `providers`, read from a child Node process
 * (this one's binary, resolving onnxruntime-node from `cwd`, the project or a check's stash) that creates the
 * session at verbose level.
 */
export async function placementOf(
  model: Uint8Array | string,
  providers: readonly ExecutionProvider[],
  cwd = process.cwd(),
): Promise<Placement> {
  const temporary = model instanceof Uint8Array
  const file = temporary ? join(tmpdir(), `seedflow-placement-${process.pid}-${Date.now()}-${++written}.onnx`) : model
  if (temporary) await writeFile(file, model)
  const eps = providers.map(ortProvider)
  const script =
    "import ort from 'onnxruntime-node';" +
    `const s = await ort.InferenceSession.create(${JSON.stringify(file)}, ` +
    `{ executionProviders: ${JSON.stringify(eps)}, logSeverityLevel: 0, logVerbosityLevel: 0 });` +
    'await s.release();'
  try {
    const log = await new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
        cwd,
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      let text = ''
      child.stdout.on('data', (d: Buffer) => (text += d.toString()))
      child.stderr.on('data', (d: Buffer) => (text += d.toString()))
      child.on('error', reject)
      child.on('exit', (code) =>
        code === 0 ? resolve(text) : reject(new Error(`the placement child exited ${code}: ${text.slice(-500)}`)),
      )
    })
    return parsePlacement(log)
  } finally {
    if (temporary) await rm(file, { force: true })
  }
}
