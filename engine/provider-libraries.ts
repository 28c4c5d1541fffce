// Why a CUDA provider does not load, said by library: ORT's own error says only "Failed to load shared library"
// (the name goes to its log). The provider is a shared library beside the ORT library this process loaded
// (onnxruntime-node's, or the PyPI wheel's that infra/install-cuda.sh installs), and the loader's first complaint
// when it is opened names the first library missing on this machine.
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'

export interface MissingLibrary {
  /** The missing file, e.g. `libonnxruntime_providers_cuda.so`, `libcublasLt.so.13`, `libcuda.so.1`. */
  library: string
  /** What it is: the provider itself, a CUDA runtime library, or the driver. */
  kind: 'provider' | 'runtime' | 'driver'
  /** The ORT library this process loaded: the provider is looked for in its folder. */
  ortLibrary: string
}

/** The ORT library this process has loaded (Linux: from /proc/self/maps), or undefined. */
export function loadedOrtLibrary(): string | undefined {
  if (process.platform !== 'linux') return undefined
  const maps = readFileSync('/proc/self/maps', 'utf8')
  return /\s(\/\S*\/libonnxruntime\.so[.\d]*)$/m.exec(maps)?.[1]
}

/** The first library that keeps `provider` (`cuda`) from loading in this process, or undefined when it loads. */
export function missingProviderLibrary(provider = 'cuda'): MissingLibrary | undefined {
  const ort = loadedOrtLibrary()
  if (!ort) return undefined
  for (const name of ['libonnxruntime_providers_shared.so', `libonnxruntime_providers_${provider}.so`]) {
    const path = join(dirname(ort), name)
    if (!existsSync(path)) return { library: name, kind: 'provider', ortLibrary: ort }
    const error = openError(path)
    if (!error) continue
    const library = /(?:^|\/|\s)([^/\s:]+\.so[.\d]*): cannot open shared object file/.exec(error)?.[1] ?? name
    return {
      library,
      kind: library === 'libcuda.so.1' ? 'driver' : library === name ? 'provider' : 'runtime',
      ortLibrary: ort,
    }
  }
  return undefined
}

/** The loader's error opening `path`, or undefined when it opens (it is not an addon: that error is expected). */
function openError(path: string): string | undefined {
  try {
    process.dlopen({ exports: {} } as NodeJS.Module, path)
    return undefined
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    return /did not self-register|napi_register_module/i.test(message) ? undefined : message
  }
}
