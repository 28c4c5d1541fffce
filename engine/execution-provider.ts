// Where a model runs, as the command line and the environment name it. Apart from runtime.ts so that code that must
// not load onnxruntime-node yet (cli/bin.js deciding to run itself again with the CUDA libraries) can read it.

export type ExecutionProvider = 'cpu' | { name: 'cuda'; deviceId?: number }

/** `cpu`, `cuda` or `cuda:<device>`. */
export function parseExecutionProvider(value: string): ExecutionProvider {
  if (value === 'cpu') return 'cpu'
  const m = /^cuda(?::(\d+))?$/.exec(value)
  if (!m) throw new Error(`unknown execution provider ${JSON.stringify(value)}: cpu, cuda or cuda:<device>`)
  return m[1] === undefined ? { name: 'cuda' } : { name: 'cuda', deviceId: Number(m[1]) }
}
