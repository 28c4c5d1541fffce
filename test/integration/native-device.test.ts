// The native engine with its kept tensors in a device's memory, on a machine without a GPU: ORT's WebGPU provider
// over Mesa's software Vulkan (infra/install-vulkan.sh). Kept and allocated tensors live in WebGPU buffers (copied
// there and back by the engine's Identity sessions), runs read them by rows, write outputs into them in place and
// scatter slices into them (ScatterND, in place): the engines' conformance suite holds unchanged. Ops WebGPU lacks
// run on the CPU here (cpuFallback 'allow'); the guard itself is test/integration/cpu-fallback.test.ts. Then the
// product's trainer (weights and AdamW moments kept on the device, updated in place) and its decoding (the KV cache
// on the device, written by slices) against onnxruntime-node's engine on the CPU.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { createNativeEngine } from '../../engine/native-engine.ts'
import { ensureNativeAddon } from '../../infra/native.ts'
import { engineConformance } from '../engine/conformance.ts'
import { TEST_ENV } from './servers.ts'

process.env.VK_ICD_FILENAMES = process.env[TEST_ENV.vulkanIcd] // lavapipe
const addon = ensureNativeAddon()
const CHILD = fileURLToPath(new URL('./ort-library-child.ts', import.meta.url))
const run = promisify(execFile)

engineConformance('native, kept tensors in WebGPU memory', () =>
  createNativeEngine({ threads: 1, addon, executionProviders: [{ name: 'webgpu' }, 'cpu'], cpuFallback: 'allow' }),
)

describe("the product's trainer and decoding with their tensors in WebGPU memory", () => {
  it('train and decode the tiny preset as the CPU does: losses and gradient norms within 1e-5, the same tokens', async () => {
    const env = { ...process.env, VK_ICD_FILENAMES: process.env[TEST_ENV.vulkanIcd] }
    const child = async (engine: string) => {
      const { stdout } = await run(process.execPath, ['--import', 'tsx', CHILD], {
        env: { ...env, SEEDFLOW_CHILD_ENGINE: engine },
        maxBuffer: 1 << 22,
      })
      return JSON.parse(stdout.trim().split('\n').at(-1) as string) as {
        steps: { loss: number; gradNorm: number }[]
        tokens: number[][]
        logprobs: number[][]
      }
    }
    const [cpu, device] = await Promise.all([child('local'), child(`native-webgpu=${addon}`)])
    const close = (a: number, b: number, tolerance: number) => Math.abs(a - b) <= tolerance * Math.max(Math.abs(b), 1)
    device.steps.forEach((s, i) => {
      const want = cpu.steps[i] as { loss: number; gradNorm: number }
      assert.ok(close(s.loss, want.loss, 1e-5), `step ${i} loss ${s.loss} vs ${want.loss}`)
      assert.ok(close(s.gradNorm, want.gradNorm, 1e-5), `step ${i} gradient norm ${s.gradNorm} vs ${want.gradNorm}`)
    })
    assert.deepEqual(device.tokens, cpu.tokens)
    for (const [r, row] of device.logprobs.entries())
      for (const [t, l] of row.entries())
        assert.ok(close(l, cpu.logprobs[r]?.[t] as number, 1e-4), `row ${r} token ${t}: ${l}`)
  })
})
