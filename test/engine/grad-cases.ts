// Gradient-check cases, one or more per differentiable op in OPS. Shapes are tiny: every element of every
// float input is perturbed.
import type { OpName } from '../../engine/ops/index.ts'
import { awayFromZero, type GradCase, positive } from './gradcheck.ts'

const spread = (u: number) => u * 2 // values on both sides of Clip's bounds
const BIG = 2 ** 62

export const GRAD_CASES: Partial<Record<OpName, GradCase[]>> = {
  Abs: [
    { name: 'elementwise', inputs: { x: { dims: [2, 3], domain: awayFromZero } }, build: (op, { x }) => op.Abs(x!) },
  ],
  Add: [
    {
      name: 'broadcast',
      inputs: { a: { dims: [2, 3, 4] }, b: { dims: [3, 1] } },
      build: (op, { a, b }) => op.Add(a!, b!),
    },
    {
      name: 'named dims',
      inputs: { a: { dims: [2, 3], shape: ['B', 3] }, b: { dims: [3] } },
      build: (op, { a, b }) => op.Add(a!, b!),
    },
    {
      name: 'run-time broadcast (dims unknown at build time)',
      inputs: { a: { dims: [2, 3] }, b: { dims: [1, 3] }, s: { dtype: 'int64', dims: [2], data: [1, 3] } },
      build: (op, { a, b, s }) => op.Add(a!, op.Reshape(b!, s!)),
    },
  ],
  Sub: [
    { name: 'broadcast', inputs: { a: { dims: [3] }, b: { dims: [2, 3] } }, build: (op, { a, b }) => op.Sub(a!, b!) },
  ],
  Mul: [
    {
      name: 'broadcast',
      inputs: { a: { dims: [2, 1, 3] }, b: { dims: [4, 1] } },
      build: (op, { a, b }) => op.Mul(a!, b!),
    },
    { name: 'same operand twice', inputs: { a: { dims: [2, 3] } }, build: (op, { a }) => op.Mul(a!, a!) },
  ],
  Div: [
    {
      name: 'broadcast',
      inputs: { a: { dims: [2, 3] }, b: { dims: [3], domain: awayFromZero } },
      build: (op, { a, b }) => op.Div(a!, b!),
    },
  ],
  Pow: [
    {
      name: 'tensor exponent',
      inputs: { x: { dims: [2, 3], domain: positive }, p: { dims: [] } },
      build: (op, { x, p }) => op.Pow(x!, p!),
    },
    { name: 'constant exponent 3', inputs: { x: { dims: [2, 3] } }, build: (op, { x }) => op.Pow(x!, 3) },
  ],
  Max: [
    { name: 'broadcast', inputs: { a: { dims: [2, 3] }, b: { dims: [3] } }, build: (op, { a, b }) => op.Max(a!, b!) },
  ],
  Min: [
    {
      name: 'broadcast',
      inputs: { a: { dims: [2, 3] }, b: { dims: [2, 1] } },
      build: (op, { a, b }) => op.Min(a!, b!),
    },
  ],
  Clip: [
    {
      name: 'both bounds as inputs',
      inputs: { x: { dims: [3, 4], domain: spread }, lo: { dims: [], data: [-0.55] }, hi: { dims: [], data: [0.65] } },
      build: (op, { x, lo, hi }) => op.Clip(x!, lo!, hi!),
    },
    {
      name: 'differentiable bounds',
      inputs: {
        x: { dims: [3, 4], domain: spread },
        lo: { dims: [], domain: () => -0.55 },
        hi: { dims: [], domain: () => 0.65 },
      },
      build: (op, { x, lo, hi }) => op.Clip(x!, lo!, hi!),
    },
    {
      name: 'upper bound only',
      inputs: { x: { dims: [5], domain: spread } },
      build: (op, { x }) => op.Clip(x!, null, 0.35),
    },
  ],
  Neg: [{ name: 'elementwise', inputs: { x: { dims: [2, 3] } }, build: (op, { x }) => op.Neg(x!) }],
  Exp: [{ name: 'elementwise', inputs: { x: { dims: [2, 3] } }, build: (op, { x }) => op.Exp(x!) }],
  Log: [
    { name: 'positive inputs', inputs: { x: { dims: [2, 3], domain: positive } }, build: (op, { x }) => op.Log(x!) },
  ],
  Sqrt: [
    { name: 'positive inputs', inputs: { x: { dims: [2, 3], domain: positive } }, build: (op, { x }) => op.Sqrt(x!) },
  ],
  Reciprocal: [
    {
      name: 'away from 0',
      inputs: { x: { dims: [2, 3], domain: awayFromZero } },
      build: (op, { x }) => op.Reciprocal(x!),
    },
  ],
  Sigmoid: [
    { name: 'elementwise', inputs: { x: { dims: [2, 3], domain: spread } }, build: (op, { x }) => op.Sigmoid(x!) },
  ],
  Tanh: [{ name: 'elementwise', inputs: { x: { dims: [2, 3], domain: spread } }, build: (op, { x }) => op.Tanh(x!) }],
  Where: [
    {
      name: 'broadcast branches',
      inputs: { c: { dtype: 'bool', dims: [2, 3], data: [1, 0, 0, 1, 1, 0] }, a: { dims: [2, 3] }, b: { dims: [3] } },
      build: (op, { c, a, b }) => op.Where(c!, a!, b!),
    },
  ],
  Cast: [
    {
      name: 'float32 → float64',
      inputs: { x: { dtype: 'float32', dims: [2, 3] } },
      build: (op, { x }) => op.Cast(x!, 'float64'),
      atol: 1e-4,
      rtol: 1e-4,
    },
  ],
  Identity: [{ name: 'passes dy', inputs: { x: { dims: [2, 3] } }, build: (op, { x }) => op.Identity(x!) }],
  MatMul: [
    {
      name: 'batched × matrix',
      inputs: { a: { dims: [2, 3, 4] }, b: { dims: [4, 5] } },
      build: (op, { a, b }) => op.MatMul(a!, b!),
    },
    {
      name: 'broadcast batch',
      inputs: { a: { dims: [2, 1, 2, 3] }, b: { dims: [3, 3, 2] } },
      build: (op, { a, b }) => op.MatMul(a!, b!),
    },
    {
      name: 'vector × batched',
      inputs: { a: { dims: [4] }, b: { dims: [2, 4, 3] } },
      build: (op, { a, b }) => op.MatMul(a!, b!),
    },
    {
      name: 'matrix × vector',
      inputs: { a: { dims: [3, 4] }, b: { dims: [4] } },
      build: (op, { a, b }) => op.MatMul(a!, b!),
    },
  ],
  Softmax: [
    { name: 'last axis', inputs: { x: { dims: [2, 3, 4] } }, build: (op, { x }) => op.Softmax(x!, -1) },
    { name: 'middle axis', inputs: { x: { dims: [2, 3, 4] } }, build: (op, { x }) => op.Softmax(x!, 1) },
  ],
  LogSoftmax: [{ name: 'last axis', inputs: { x: { dims: [2, 5] } }, build: (op, { x }) => op.LogSoftmax(x!, -1) }],
  RMSNormalization: [
    {
      name: 'last axis',
      inputs: { x: { dims: [2, 3, 4] }, s: { dims: [4] } },
      build: (op, { x, s }) => op.RMSNormalization(x!, s!, { epsilon: 1e-5 }),
    },
    {
      name: 'last two axes',
      inputs: { x: { dims: [2, 3, 4] }, s: { dims: [3, 4] } },
      build: (op, { x, s }) => op.RMSNormalization(x!, s!, { axis: 1, epsilon: 1e-3 }),
    },
  ],
  Trilu: [
    {
      name: 'lower, k = 1',
      inputs: { x: { dims: [2, 3, 4] } },
      build: (op, { x }) => op.Trilu(x!, { k: 1, upper: 0 }),
    },
    { name: 'upper', inputs: { x: { dims: [3, 3] } }, build: (op, { x }) => op.Trilu(x!) },
  ],
  ReduceSum: [
    {
      name: 'axis 1, keepdims 0',
      inputs: { x: { dims: [2, 3, 4] } },
      build: (op, { x }) => op.ReduceSum(x!, [1], { keepdims: 0 }),
    },
    { name: 'all axes, keepdims 1', inputs: { x: { dims: [2, 3] } }, build: (op, { x }) => op.ReduceSum(x!) },
  ],
  ReduceSumSquare: [
    {
      name: 'axis 1, keepdims 0',
      inputs: { x: { dims: [2, 3, 4] } },
      build: (op, { x }) => op.ReduceSumSquare(x!, [1], { keepdims: 0 }),
    },
    { name: 'all axes, keepdims 1', inputs: { x: { dims: [2, 3] } }, build: (op, { x }) => op.ReduceSumSquare(x!) },
  ],
  ReduceMean: [
    { name: 'last axis', inputs: { x: { dims: [2, 3, 4] } }, build: (op, { x }) => op.ReduceMean(x!, [-1]) },
    {
      name: 'axes 0 and 2, keepdims 0',
      inputs: { x: { dims: [2, 3, 4] } },
      build: (op, { x }) => op.ReduceMean(x!, [0, 2], { keepdims: 0 }),
    },
  ],
  ReduceMax: [
    {
      name: 'axis 1, keepdims 0',
      inputs: { x: { dims: [2, 3, 4] } },
      build: (op, { x }) => op.ReduceMax(x!, [1], { keepdims: 0 }),
    },
  ],
  ReduceLogSumExp: [
    {
      name: 'axes 0 and 2',
      inputs: { x: { dims: [2, 3, 4] } },
      build: (op, { x }) => op.ReduceLogSumExp(x!, [0, 2], { keepdims: 0 }),
    },
  ],
  Reshape: [{ name: '0 and −1', inputs: { x: { dims: [2, 3, 4] } }, build: (op, { x }) => op.Reshape(x!, [0, -1]) }],
  Transpose: [
    { name: 'perm [2,0,1]', inputs: { x: { dims: [2, 3, 4] } }, build: (op, { x }) => op.Transpose(x!, [2, 0, 1]) },
    { name: 'default reverses', inputs: { x: { dims: [2, 3] } }, build: (op, { x }) => op.Transpose(x!) },
  ],
  Unsqueeze: [
    { name: 'axes 1 and −1', inputs: { x: { dims: [2, 3] } }, build: (op, { x }) => op.Unsqueeze(x!, [1, -1]) },
  ],
  Squeeze: [
    { name: 'axis 1', inputs: { x: { dims: [2, 1, 3] } }, build: (op, { x }) => op.Squeeze(x!, [1]) },
    { name: 'every size-1 axis', inputs: { x: { dims: [1, 3, 1] } }, build: (op, { x }) => op.Squeeze(x!) },
  ],
  Concat: [
    {
      name: 'three inputs, axis 1',
      inputs: { a: { dims: [2, 1] }, b: { dims: [2, 3] }, c: { dims: [2, 2] } },
      build: (op, { a, b, c }) => op.Concat([a!, b!, c!], 1),
    },
    {
      name: 'named dims along the axis',
      inputs: { a: { dims: [2, 3], shape: [2, 'P'] }, b: { dims: [2, 1], shape: [2, 'T'] } },
      build: (op, { a, b }) => op.Concat([a!, b!], -1),
    },
  ],
  Split: [{ name: 'sizes 2 and 3', inputs: { x: { dims: [2, 5] } }, build: (op, { x }) => op.Split(x!, [2, 3], 1) }],
  Slice: [
    {
      name: 'two axes, negative start',
      inputs: { x: { dims: [4, 3, 5] } },
      build: (op, { x }) => op.Slice(x!, [1, -3], [3, BIG], [0, 2]),
    },
    {
      name: 'named dim, negative end',
      inputs: { x: { dims: [2, 5], shape: ['B', 'T'] } },
      build: (op, { x }) => op.Slice(x!, [1], [-1], [1]),
    },
  ],
  Pad: [
    {
      name: 'constant value, selected axes',
      inputs: { x: { dims: [2, 3] }, v: { dims: [] } },
      build: (op, { x, v }) => op.Pad(x!, [1, 0, 2, 1], v!, [0, 1]),
    },
    {
      name: 'axes and pads as tensors',
      inputs: {
        x: { dims: [2, 3] },
        p: { dtype: 'int64', dims: [2], data: [2, 1] },
        a: { dtype: 'int64', dims: [1], data: [-1] },
      },
      build: (op, { x, p, a }) => op.Pad(x!, p!, 0, a!),
    },
  ],
  Expand: [{ name: 'broadcast up', inputs: { x: { dims: [3, 1] } }, build: (op, { x }) => op.Expand(x!, [2, 3, 4]) }],
  Gather: [
    {
      name: 'axis 0, repeated indices',
      inputs: { d: { dims: [3, 4] }, i: { dtype: 'int64', dims: [2, 2], data: [0, 2, 2, 1] } },
      build: (op, { d, i }) => op.Gather(d!, i!, 0),
    },
    {
      name: 'axis 1, negative and repeated indices',
      inputs: { d: { dims: [2, 4, 3] }, i: { dtype: 'int64', dims: [3], data: [3, 0, -1] } },
      build: (op, { d, i }) => op.Gather(d!, i!, 1),
    },
  ],
  GatherElements: [
    {
      name: 'axis 1',
      inputs: { d: { dims: [2, 4] }, i: { dtype: 'int64', dims: [2, 3], data: [0, 3, 3, 1, 1, 2] } },
      build: (op, { d, i }) => op.GatherElements(d!, i!, 1),
    },
  ],
  GatherND: [
    {
      name: 'pairs of indices, repeated',
      inputs: { d: { dims: [3, 4, 2] }, i: { dtype: 'int64', dims: [3, 2], data: [0, 1, 2, 3, 0, 1] } },
      build: (op, { d, i }) => op.GatherND(d!, i!),
    },
  ],
  ScatterElements: [
    {
      name: 'reduction none',
      inputs: { d: { dims: [2, 4] }, i: { dtype: 'int64', dims: [2, 2], data: [0, 3, 2, 1] }, u: { dims: [2, 2] } },
      build: (op, { d, i, u }) => op.ScatterElements(d!, i!, u!, 1, 'none'),
    },
    {
      name: 'reduction add, repeated indices',
      inputs: {
        d: { dims: [2, 4] },
        i: { dtype: 'int64', dims: [2, 3], data: [0, 3, 0, 1, 1, 2] },
        u: { dims: [2, 3] },
      },
      build: (op, { d, i, u }) => op.ScatterElements(d!, i!, u!, 1, 'add'),
    },
  ],
  ScatterND: [
    {
      name: 'reduction none',
      inputs: { d: { dims: [3, 2] }, i: { dtype: 'int64', dims: [2, 1], data: [2, 0] }, u: { dims: [2, 2] } },
      build: (op, { d, i, u }) => op.ScatterND(d!, i!, u!, 'none'),
    },
    {
      name: 'reduction add, repeated indices',
      inputs: { d: { dims: [3, 2] }, i: { dtype: 'int64', dims: [3, 1], data: [2, 0, 2] }, u: { dims: [3, 2] } },
      build: (op, { d, i, u }) => op.ScatterND(d!, i!, u!, 'add'),
    },
  ],
}
