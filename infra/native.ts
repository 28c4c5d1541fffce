// seedflow's native engine backend (native/seedflow-ort, infra/install-native.sh: cargo, keyed by its sources),
// ensured by the test command like the other binaries it needs.
import { ensuredByScript } from './tools.ts'

/** The path of the built addon, building it first when this version of its sources has not been built. */
export function ensureNativeAddon(env: NodeJS.ProcessEnv = process.env): string {
  return ensuredByScript('install-native.sh', 'native engine addon (cargo)', env)
}
