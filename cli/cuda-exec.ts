// A command that asks for CUDA (`--execution-provider cuda[:N]`) runs itself again with the CUDA provider's
// libraries first on LD_LIBRARY_PATH (infra/cuda.ts), before anything imports onnxruntime-node: the dynamic loader
// reads that path only when a process starts. Where they are not installed the command goes on as it is, and the
// provider's probe refuses it naming what is missing and `bash infra/install-cuda.sh`.
import { spawn } from 'node:child_process'
import { asksForCuda, cudaEnvironment, cudaInstalled, cudaLibraryPath, loadsCudaLibraries } from '../infra/cuda.ts'

/** The exit code of this command run again with the CUDA libraries, or undefined: go on in this process. */
export async function runWithCudaLibraries(argv: readonly string[] = process.argv): Promise<number | undefined> {
  if (process.platform !== 'linux' || !asksForCuda(argv.slice(2)) || !cudaInstalled() || loadsCudaLibraries())
    return undefined
  // its own process group, so that a terminal's Ctrl-C reaches it once, through this process, not twice
  const child = spawn(process.execPath, [...process.execArgv, ...argv.slice(1)], {
    stdio: 'inherit',
    env: cudaEnvironment(cudaLibraryPath()),
    detached: true,
  })
  // the command runs in the child now: a signal to this process is meant for it
  const forward = (signal: NodeJS.Signals) => () => child.kill(signal)
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, forward(signal))
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve(code ?? (signal === 'SIGINT' ? 130 : 1)))
  })
}
