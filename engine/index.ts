// Public surface of the tensor engine: build a graph with the builder, differentiate it, encode it, run it.

export { ADAMW_IO, type AdamWGraphConfig, adamwScalars, appendAdamW } from './adamw-graph.ts'
export { type GradientOptions, gradients } from './autodiff.ts'
export { type Builder, createBuilder, type Helpers, type OpMethods } from './builder.ts'
export { type AnyTypedArray, type DType, isFloat, type TypedArrayOf } from './dtype.ts'
export { EngineRuntimeError, GradientError, GraphError, ShapeError, UnsupportedGradientError } from './errors.ts'
export { describeProvider, type ExecutionProvider, ortProvider, parseExecutionProvider } from './execution-provider.ts'
export {
  type Attr,
  type Block,
  type ConstTensor,
  constTensor,
  Graph,
  type Node,
  type Value,
  type ValueInfo,
} from './ir.ts'
export {
  type EngineTraffic,
  type MeteredEngine,
  type MeterOptions,
  type ModelTraffic,
  meteredEngine,
} from './metered.ts'
export { type ModelFile, writeModelFiles } from './model-files.ts'
export { encodeModel, externalLayout, IR_VERSION, OPSET } from './onnx.ts'
export { NONDIFFERENTIABLE, type OpDef, type VjpContext, type VjpFn } from './op-def.ts'
export { OPS, type OpName } from './ops/index.ts'
export {
  AdamW,
  type AdamWConfig,
  type AdamWState,
  clipGradNorm,
  clipScale,
  constantLr,
  cosineWithWarmup,
  globalNorm,
  type LrSchedule,
  OptimizerError,
  type ParamSet,
} from './optimizer.ts'
export { loadedOrtLibrary, type MissingLibrary } from './provider-libraries.ts'
export {
  createLocalEngine,
  createWorkerEngine,
  type Engine,
  type KeptFeeds,
  type KeptWrite,
  type ModelHandle,
  modelId,
  ProviderUnavailableError,
  probeExecutionProvider,
  type RunOptions,
  type RuntimeConfig,
} from './runtime.ts'
export { type Dim, formatShape, type Shape } from './shape.ts'
export { type Feeds, type Fetches, type TensorData, tensor } from './tensor.ts'
