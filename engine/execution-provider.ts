// Where a model runs, as the command line and the environment name it. Apart from runtime.ts so that code that must
// not load onnxruntime-node yet (cli/bin.js deciding to run itself again with the CUDA libraries) can read it.

/**
 * `cpu`; CUDA on a device (ORT's CUDA provider: infra/install-cuda.sh); or ORT's WebGPU provider, which
 * onnxruntime-node bundles (Vulkan on Linux): a device provider that runs without a GPU over Mesa's software Vulkan
 * (infra/install-vulkan.sh), which is how the tests exercise what only a device session does, such as the guard
 * against nodes left on the CPU (engine/cpu-fallback.ts). Not tuned or measured for speed.
 */
export type ExecutionProvider = 'cpu' | { name: 'cuda'; deviceId?: number } | { name: 'webgpu' }

/** `cpu`, `cuda`, `cuda:<device>` or `webgpu`. */
export function parseExecutionProvider(value: string): ExecutionProvider {
  if (value === 'cpu') return 'cpu'
  if (value === 'webgpu') return { name: 'webgpu' }
  const m = /^cuda(?::(\d+))?$/.exec(value)
  if (!m) throw new Error(`unknown execution provider ${JSON.stringify(value)}: cpu, cuda, cuda:<device> or webgpu`)
  return m[1] === undefined ? { name: 'cuda' } : { name: 'cuda', deviceId: Number(m[1]) }
}

/** The provider as onnxruntime-node's session options name it. */
export function ortProvider(ep: ExecutionProvider): 'cpu' | { name: 'cuda'; deviceId: number } | { name: 'webgpu' } {
  if (ep === 'cpu') return 'cpu'
  return ep.name === 'cuda' ? { name: 'cuda', deviceId: ep.deviceId ?? 0 } : { name: 'webgpu' }
}

/** How a message names where models run: "CUDA device 0", "WebGPU", "the CPU". */
export function describeProvider(ep: ExecutionProvider): string {
  if (ep === 'cpu') return 'the CPU'
  return ep.name === 'cuda' ? `CUDA device ${ep.deviceId ?? 0}` : 'WebGPU'
}
