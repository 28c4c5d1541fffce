// Software Vulkan (Mesa's lavapipe, infra/install-vulkan.sh), over which the WebGPU execution provider runs on a
// machine without a GPU: the tests' device provider. Ensured by the test command like the other binaries it needs.
import { ensuredByScript } from './tools.ts'

/** The path of lavapipe's Vulkan ICD file, installing Mesa's package first when it is missing (as root). */
export function ensureSoftwareVulkan(env: NodeJS.ProcessEnv = process.env): string {
  return ensuredByScript('install-vulkan.sh', 'software Vulkan for the device-provider tests', env)
}
