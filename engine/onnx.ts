// Deterministic ONNX encoding: the same graph always gives the same bytes (nodes in build order, attributes
// sorted by name, no timestamps), so a model's hash can key session caches and artifacts.
import { create, toBinary } from '@bufbuild/protobuf'
import {
  AttributeProto_AttributeType,
  AttributeProtoSchema,
  GraphProtoSchema,
  ModelProtoSchema,
  NodeProtoSchema,
  OperatorSetIdProtoSchema,
  StringStringEntryProtoSchema,
  type TensorProto,
  TensorProto_DataLocation,
  TensorProtoSchema,
  TensorShapeProto_DimensionSchema,
  TensorShapeProtoSchema,
  TypeProto_TensorSchema,
  TypeProtoSchema,
  ValueInfoProtoSchema,
} from 'onnx-buf'
import { ONNX_DTYPE } from './dtype.ts'
import { GraphError } from './errors.ts'
import type { Attr, ConstTensor, Graph, Node, Value } from './ir.ts'
import { isUnknownDim } from './shape.ts'

/** The one pinned opset and IR version (verified end to end with onnxruntime-node 1.30). */
export const OPSET = 23
export const IR_VERSION = 11

export interface EncodeOptions {
  /** Extra opset imports for custom domains, e.g. `{ 'com.microsoft': 1 }`. */
  domains?: Record<string, number>
  /**
   * Graph inputs to bake in as initializers (a standalone model for deployment): each named input leaves the
   * input list and its tensor is stored in the model.
   */
  initializers?: Record<string, ConstTensor>
  /**
   * Store the initializers outside the model, in the file `location` beside it (ONNX external data: protobuf
   * caps a model at 2 GB), at the offsets `externalLayout` gives; the bytes of the tensors are not in the result.
   */
  externalData?: { location: string }
}

/** Where each initializer of a model with external data lies in its data file, in file order. */
export function externalLayout(initializers: Record<string, ConstTensor>): Array<{ name: string; offset: number }> {
  let offset = 0
  return Object.keys(initializers)
    .sort()
    .map((name) => {
      const at = offset
      // 64-byte aligned, as ONNX's own writer does, so that a reader may map them
      offset += Math.ceil((initializers[name] as ConstTensor).data.byteLength / 64) * 64
      return { name, offset: at }
    })
}

/** Serialises `graph` to ModelProto bytes; nodes that no output depends on are left out. */
export function encodeModel(graph: Graph, options: EncodeOptions = {}): Uint8Array {
  if (graph.outputs.length === 0) throw new GraphError(`graph ${graph.name} has no outputs`)
  const nodes = liveNodes(graph)
  const domains = new Set(nodes.map((n) => n.domain).filter((d) => d !== ''))
  const opsetImport = [create(OperatorSetIdProtoSchema, { domain: '', version: BigInt(OPSET) })]
  for (const domain of [...domains].sort()) {
    const version = options.domains?.[domain]
    if (version === undefined)
      throw new GraphError(`graph ${graph.name} uses domain ${domain}: give its opset version in domains`)
    opsetImport.push(create(OperatorSetIdProtoSchema, { domain, version: BigInt(version) }))
  }
  const baked = options.initializers ?? {}
  for (const name of Object.keys(baked)) {
    if (!graph.inputs.some((v) => v.name === name))
      throw new GraphError(`initializer ${name} is not an input of graph ${graph.name}`)
  }
  const model = create(ModelProtoSchema, {
    irVersion: BigInt(IR_VERSION),
    producerName: 'seedflow',
    opsetImport,
    graph: create(GraphProtoSchema, {
      name: graph.name,
      node: nodes.map(encodeNode),
      input: graph.inputs.filter((v) => !(v.name in baked)).map(valueInfo),
      output: graph.outputs.map(valueInfo),
      initializer: options.externalData
        ? externalLayout(baked).map(({ name, offset }) =>
            externalTensor(baked[name] as ConstTensor, name, options.externalData?.location as string, offset),
          )
        : Object.keys(baked)
            .sort()
            .map((name) => encodeTensor(baked[name] as ConstTensor, name)),
    }),
  })
  return toBinary(ModelProtoSchema, model)
}

function liveNodes(graph: Graph): Node[] {
  const live = new Set<number>()
  const needed = new Set(graph.outputs.map((v) => v.id))
  for (let i = graph.nodes.length - 1; i >= 0; i--) {
    const node = graph.nodes[i]!
    if (!node.outputs.some((y) => needed.has(y.id))) continue
    live.add(node.id)
    for (const x of node.inputs) if (x) needed.add(x.id)
  }
  return graph.nodes.filter((n) => live.has(n.id))
}

function encodeNode(node: Node) {
  return create(NodeProtoSchema, {
    name: node.name,
    opType: node.opType,
    domain: node.domain,
    input: node.inputs.map((x) => x?.name ?? ''),
    output: node.outputs.map((y) => y.name),
    attribute: Object.keys(node.attrs)
      .sort()
      .map((name) => encodeAttr(name, node.attrs[name]!)),
  })
}

function encodeAttr(name: string, a: Attr) {
  const T = AttributeProto_AttributeType
  switch (a.type) {
    case 'int':
      return create(AttributeProtoSchema, { name, type: T.INT, i: BigInt(a.value) })
    case 'float':
      return create(AttributeProtoSchema, { name, type: T.FLOAT, f: a.value })
    case 'ints':
      return create(AttributeProtoSchema, { name, type: T.INTS, ints: a.value.map((v) => BigInt(v)) })
    case 'floats':
      return create(AttributeProtoSchema, { name, type: T.FLOATS, floats: [...a.value] })
    case 'string':
      return create(AttributeProtoSchema, { name, type: T.STRING, s: new TextEncoder().encode(a.value) })
    case 'tensor':
      return create(AttributeProtoSchema, { name, type: T.TENSOR, t: encodeTensor(a.value) })
  }
}

export function encodeTensor(t: ConstTensor, name = ''): TensorProto {
  const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)
  return create(TensorProtoSchema, {
    name,
    dims: t.dims.map((d) => BigInt(d)),
    dataType: ONNX_DTYPE[t.dtype],
    rawData: new Uint8Array(bytes) as Uint8Array<ArrayBuffer>,
  })
}

/** A tensor whose bytes lie in `location` at `offset` (ONNX external data). */
function externalTensor(t: ConstTensor, name: string, location: string, offset: number): TensorProto {
  const entry = (key: string, value: string) => create(StringStringEntryProtoSchema, { key, value })
  return create(TensorProtoSchema, {
    name,
    dims: t.dims.map((d) => BigInt(d)),
    dataType: ONNX_DTYPE[t.dtype],
    dataLocation: TensorProto_DataLocation.EXTERNAL,
    externalData: [
      entry('location', location),
      entry('offset', String(offset)),
      entry('length', String(t.data.byteLength)),
    ],
  })
}

function valueInfo(v: Value) {
  return create(ValueInfoProtoSchema, {
    name: v.name,
    type: create(TypeProtoSchema, {
      value: {
        case: 'tensorType',
        value: create(TypeProto_TensorSchema, {
          elemType: ONNX_DTYPE[v.dtype],
          shape: create(TensorShapeProtoSchema, {
            dim: v.shape.map((d) =>
              create(TensorShapeProto_DimensionSchema, {
                value:
                  typeof d === 'number'
                    ? { case: 'dimValue', value: BigInt(d) }
                    : isUnknownDim(d)
                      ? { case: undefined }
                      : { case: 'dimParam', value: d },
              }),
            ),
          }),
        }),
      },
    }),
  })
}
