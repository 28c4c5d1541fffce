// No silent CPU fallback. A session on a device provider (CUDA, WebGPU) leaves two kinds of node on the CPU:
//  - the shape computation, on purpose: ORT moves a node to the CPU when its inputs are already there (a Shape's
//    output, which the device kernel writes to host memory), small initializers (≤ 100 elements) or graph inputs,
//    because a few integers cost less there than a kernel launch and two copies (its GetCpuPreferredNodes);
//  - every node whose op has no kernel on the provider for its opset and types, silently, copying its inputs and
//    outputs across at every run: a training step that quietly runs an op on the host.
// The guard lets the first kind through and refuses the second, naming each node. It reads the placement from
// ORT's own verbose log (engine/placement.ts) and decides from the model which CPU nodes are shape computation:
// Shape and Size, and a node whose every input is a small constant, an integer or boolean graph input (index
// tensors: feeds start in host memory anyway) or the output of another such node. A floating-point graph input
// on the CPU is refused: that is data, not a shape. Nodes ORT's optimizer made (absent from the model) are refused
// too. Shape computation can make floats (the causal mask, from the sequence length: T² floats copied to the
// device at each run). Exceptions are listed, each with why and what it costs: CPU_EXCEPTIONS (docs/design.md §14).
import { readFile } from 'node:fs/promises'
import { fromBinary } from '@bufbuild/protobuf'
import { type ModelProto, ModelProtoSchema, TensorProto_DataType } from 'onnx-buf'
import { EngineRuntimeError } from './errors.ts'
import { describeProvider, type ExecutionProvider } from './execution-provider.ts'
import type { ModelFile } from './model-files.ts'
import { type Placement, placementOf } from './placement.ts'

/** An op allowed on the CPU in a device session beyond the shape computation: why, and what it costs per run. */
export interface CpuException {
  readonly op: string
  readonly why: string
  readonly cost: string
}

/**
 * None: every op of the train, score and decode graphs has a CUDA kernel at opset 23 for the types they use (ORT's
 * OperatorKernels.md, checked 2026-12-05), so a CUDA session of them should leave only shape computation on the
 * CPU. An entry here needs its cost measured on the device it is allowed for.
 */
export const CPU_EXCEPTIONS: readonly CpuException[] = []

export interface CpuNode {
  readonly op: string
  readonly name: string
  /** Why it is refused. */
  readonly reason: string
}

/**
 * The CPU nodes a device session of `model` may not have, with their reasons (empty: the placement is allowed).
 * When ORT put every node on the CPU, its log lists none of them: the model's nodes stand for them.
 */
export function refusedCpuNodes(
  model: ModelProto,
  placement: Placement,
  exceptions: readonly CpuException[] = CPU_EXCEPTIONS,
): CpuNode[] {
  const cpu = placement.providers.CPUExecutionProvider
  if (!cpu) return []
  const listed =
    cpu.nodes.length > 0 ? cpu.nodes : (model.graph?.node ?? []).map((n) => ({ op: n.opType, name: n.name }))
  const allowedOps = new Set(exceptions.map((e) => e.op))
  const shape = shapeComputation(model)
  const known = new Set((model.graph?.node ?? []).map((n) => n.name))
  const refused: CpuNode[] = []
  for (const node of listed) {
    if (allowedOps.has(node.op) || shape.has(node.name)) continue
    refused.push({
      ...node,
      reason: known.has(node.name)
        ? 'computes on data, not shapes: its op has no kernel on the provider for these types, or a floating-point input'
        : "a node ORT's optimizer made (not in the model)",
    })
  }
  return refused
}

const INDEX_TYPES = new Set<number>([
  TensorProto_DataType.INT64,
  TensorProto_DataType.INT32,
  TensorProto_DataType.INT16,
  TensorProto_DataType.INT8,
  TensorProto_DataType.UINT64,
  TensorProto_DataType.UINT32,
  TensorProto_DataType.UINT16,
  TensorProto_DataType.UINT8,
  TensorProto_DataType.BOOL,
])

/** ORT's threshold for an initializer a CPU-preferred node may read (kSmallInitializerThreshold). */
const SMALL = 100

/** Names of the nodes of `model` that compute shapes and indices only (see the file's comment). */
export function shapeComputation(model: ModelProto): Set<string> {
  const graph = model.graph
  const onHost = new Set<string>([''])
  for (const t of graph?.initializer ?? []) if (t.dims.reduce((n, d) => n * Number(d), 1) <= SMALL) onHost.add(t.name)
  for (const input of graph?.input ?? []) {
    const type = input.type?.value
    if (type?.case === 'tensorType' && INDEX_TYPES.has(type.value.elemType)) onHost.add(input.name)
  }
  const nodes = new Set<string>()
  for (const node of graph?.node ?? []) {
    const small =
      node.opType === 'Shape' ||
      node.opType === 'Size' ||
      (node.opType === 'Constant' &&
        node.attribute.every((a) => !a.t || a.t.dims.reduce((n, d) => n * Number(d), 1) <= SMALL)) ||
      (node.opType !== 'Constant' && node.input.every((x) => onHost.has(x)))
    if (!small) continue
    nodes.add(node.name)
    for (const y of node.output) onHost.add(y)
  }
  return nodes
}

/** A device session that would run nodes on the CPU that are not shape computation; `nodes` names each. */
export class CpuFallbackError extends EngineRuntimeError {
  override name = 'CpuFallbackError'
  constructor(
    readonly model: string,
    readonly provider: string,
    readonly nodes: readonly CpuNode[],
  ) {
    const ops = new Map<string, number>()
    for (const n of nodes) ops.set(n.op, (ops.get(n.op) ?? 0) + 1)
    const first = nodes
      .slice(0, 5)
      .map((n) => `${n.op} (${n.name || 'unnamed'}: ${n.reason})`)
      .join('; ')
    super(
      `model ${model.slice(0, 12)} on ${provider}: ORT placed ${nodes.length} node(s) on the CPU that are not shape ` +
        `computation, by op ${[...ops].map(([op, n]) => `${op} ×${n}`).join(', ')}: ${first}` +
        `${nodes.length > 5 ? '; …' : ''}. Replace the op in the graph, or list it in CPU_EXCEPTIONS ` +
        '(engine/cpu-fallback.ts) with its measured cost',
    )
  }
}

/** The model's graph (for a model on disk, its .onnx file: the weights are external data, not read). */
export async function readModelProto(model: Uint8Array | ModelFile): Promise<ModelProto> {
  const bytes = model instanceof Uint8Array ? model : await readFile(model.path)
  return fromBinary(ModelProtoSchema, bytes)
}

/**
 * Throws CpuFallbackError when a session of `model` on `providers` (a device provider first) would leave on the
 * CPU a node that is not shape computation; returns how many nodes the CPU got (all of them shape computation).
 * The placement comes from a child process that creates the same session at ORT's verbose level.
 */
export async function guardPlacement(
  model: Uint8Array | ModelFile,
  id: string,
  providers: readonly ExecutionProvider[],
): Promise<{ cpuNodes: number }> {
  const [placement, proto] = await Promise.all([
    placementOf(model instanceof Uint8Array ? model : model.path, providers),
    readModelProto(model),
  ])
  if (Object.keys(placement.providers).length === 0)
    throw new EngineRuntimeError(`model ${id.slice(0, 12)}: ORT's verbose log gave no placement to check`)
  const device = providers.find((p) => p !== 'cpu')
  const refused = device ? refusedCpuNodes(proto, placement) : []
  if (refused.length > 0) throw new CpuFallbackError(id, device ? describeProvider(device) : 'the CPU', refused)
  return { cpuNodes: placement.providers.CPUExecutionProvider?.count ?? 0 }
}

const placementVerdicts = new Map<string, Promise<unknown>>()

/**
 * The guard of an engine's load on a device provider (guardPlacement), once per model and providers in
 * this process: its child process creates the session a second time, so resident policies that load the same
 * model again each phase pay it once. Undefined where there is nothing to guard.
 */
export function guarded(
  model: Uint8Array | ModelFile,
  id: string,
  cfg: { executionProviders: readonly ExecutionProvider[]; cpuFallback: 'refuse' | 'allow' },
): Promise<unknown> | undefined {
  if (cfg.cpuFallback === 'allow' || cfg.executionProviders[0] === 'cpu') return undefined
  const key = `${id} ${JSON.stringify(cfg.executionProviders)}`
  let verdict = placementVerdicts.get(key)
  if (!verdict) {
    verdict = guardPlacement(model, id, cfg.executionProviders)
    verdict.catch(() => placementVerdicts.delete(key)) // a refusal is not kept: the next load checks again
    placementVerdicts.set(key, verdict)
  }
  return verdict
}
