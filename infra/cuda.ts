// Where ONNX Runtime's CUDA provider from PyPI lives (infra/install-cuda.sh puts it there) and how a process comes
// to load it: onnxruntime-node's binding finds `libonnxruntime.so.1` through the dynamic loader when it is first
// imported, and LD_LIBRARY_PATH comes before the binding's own RUNPATH. So a process that wants CUDA is started with
// the provider's folder (and the CUDA 13 runtime's, when fetched) first on LD_LIBRARY_PATH; the CLI does it by
// running itself again (cli/bin.js) before anything imports onnxruntime-node. Nothing here imports it.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseExecutionProvider } from '../engine/execution-provider.ts'
import { cacheDir } from './models.ts'
import { installIfMissing, PROJECT_ROOT } from './tools.ts'

/** The onnxruntime-node version installed in this clone (the wheel must be exactly this version). */
export function ortVersion(): string {
  const pkg = join(PROJECT_ROOT, 'node_modules', 'onnxruntime-node', 'package.json')
  return (JSON.parse(readFileSync(pkg, 'utf8')) as { version: string }).version
}

/** The folder of the wheel's libraries (libonnxruntime.so.1 and its providers) for this onnxruntime-node. */
export function ortGpuDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheDir(env), `onnxruntime-gpu-${ortVersion()}`)
}

/** The command that installs them, for messages. */
export const INSTALL_CUDA = 'bash infra/install-cuda.sh'

/** The folders to put first on LD_LIBRARY_PATH: the provider's and each fetched CUDA 13 runtime's. */
export function cudaLibraryPath(env: NodeJS.ProcessEnv = process.env): string[] {
  const cache = cacheDir(env)
  const runtimes = existsSync(cache)
    ? readdirSync(cache)
        .filter((d) => d.startsWith('cuda13-runtime-') && existsSync(join(cache, d, 'lib', 'SHA256SUMS')))
        .map((d) => join(cache, d, 'lib'))
    : []
  return [ortGpuDir(env), ...runtimes]
}

/** The provider folder's sha256 list, which the install writes last. */
const installedStamp = (env: NodeJS.ProcessEnv) => join(ortGpuDir(env), 'SHA256SUMS')

/** Whether the provider's libraries are installed. */
export function cudaInstalled(env: NodeJS.ProcessEnv = process.env): boolean {
  return existsSync(installedStamp(env))
}

/** Runs the idempotent install (it prints its own progress) and returns the provider's folder. */
export function ensureCudaLibraries(env: NodeJS.ProcessEnv = process.env): string {
  const missing = () => (cudaInstalled(env) ? undefined : installedStamp(env))
  installIfMissing('install-cuda.sh', 'installing the CUDA provider', missing, env)
  return ortGpuDir(env)
}

/** The environment of a process that loads the wheel's libraries: LD_LIBRARY_PATH with `dirs` first. */
export function cudaEnvironment(dirs: readonly string[], env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const rest = (env.LD_LIBRARY_PATH ?? '').split(':').filter((d) => d !== '' && !dirs.includes(d))
  return { ...env, LD_LIBRARY_PATH: [...dirs, ...rest].join(':') }
}

/**
 * Whether a command line asks for a CUDA execution provider: `--execution-provider cuda[:N]` (or `=`), or without
 * that option SEEDFLOW_EXECUTION_PROVIDER (the option's environment variable).
 */
export function asksForCuda(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): boolean {
  const at = argv.findLastIndex((arg) => arg === '--execution-provider' || arg.startsWith('--execution-provider='))
  const arg = argv[at] ?? ''
  const value =
    at < 0
      ? (env.SEEDFLOW_EXECUTION_PROVIDER ?? '')
      : arg.includes('=')
        ? arg.slice(arg.indexOf('=') + 1)
        : argv[at + 1]
  try {
    const provider = parseExecutionProvider(value ?? '')
    return provider !== 'cpu' && provider.name === 'cuda'
  } catch {
    return false // not a provider: the command itself refuses it
  }
}

/** Whether this process's LD_LIBRARY_PATH starts with the provider's folders already. */
export function loadsCudaLibraries(env: NodeJS.ProcessEnv = process.env): boolean {
  const dirs = cudaLibraryPath(env)
  return (env.LD_LIBRARY_PATH ?? '').split(':').slice(0, dirs.length).join(':') === dirs.join(':')
}

/** What to do about a library the CUDA provider could not load (engine/provider-libraries.ts's `kind`). */
export function cudaRemedy(missing: { library: string; kind: 'provider' | 'runtime' | 'driver' }): string {
  switch (missing.kind) {
    case 'provider':
      return `install ONNX Runtime's CUDA provider from PyPI with \`${INSTALL_CUDA}\` (a CUDA worker then loads it by itself)`
    case 'runtime':
      return (
        `install the CUDA 13 runtime with \`${INSTALL_CUDA} --runtime=yes\`, or put the folder of this machine's ` +
        `${missing.library} on LD_LIBRARY_PATH`
      )
    case 'driver':
      return 'this machine has no NVIDIA driver (CUDA 13 needs driver 580 or later) or no GPU'
  }
}
