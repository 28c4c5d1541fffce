// The native engine (engine/native-engine.ts) against onnxruntime-node's on the product's graphs, at one ORT thread:
// three trainer steps (kept weights and moments, the optimizer in the graph, written in place) and sampled decoding
// with a KV cache (allocated, read by rows, written by slices) give the same losses, gradient norms, weights (bit for
// bit), tokens and log-probabilities.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { ensureNativeAddon } from '../../infra/native.ts'

const CHILD = fileURLToPath(new URL('../integration/ort-library-child.ts', import.meta.url))
const run = promisify(execFile)

async function child(engine: string) {
  const env = { ...process.env, SEEDFLOW_CHILD_ENGINE: engine }
  const { stdout } = await run(process.execPath, ['--import', 'tsx', CHILD], { env, maxBuffer: 1 << 22 })
  return JSON.parse(stdout.trim().split('\n').at(-1) as string) as Record<string, unknown>
}

describe('native engine parity', () => {
  it("trains and decodes the tiny preset exactly as onnxruntime-node's engine does, at one thread", async () => {
    const addon = ensureNativeAddon()
    const [local, native] = await Promise.all([child('local'), child(`native=${addon}`)])
    assert.equal(native.ortLibrary, local.ortLibrary, 'the same ORT library')
    assert.deepEqual(native.steps, local.steps)
    assert.equal(native.weights, local.weights)
    assert.deepEqual(native.tokens, local.tokens)
    assert.deepEqual(native.logprobs, local.logprobs)
  })
})
