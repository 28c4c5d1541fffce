// ONNX Runtime's CUDA provider from PyPI (infra/install-cuda.sh): the wheel's main library, loaded in place of
// onnxruntime-node's through LD_LIBRARY_PATH, gives the same CPU results bit for bit; and a CUDA worker on a
// machine without the CUDA runtime or driver (this one, and CI's) refuses to start, naming the first library the
// loader could not find and the command that installs it. Nothing here needs a GPU.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { cudaEnvironment, cudaInstalled } from '../../infra/cuda.ts'
import { seedflow } from '../cli/seedflow-process.ts'
import { TEST_ENV } from './servers.ts'

const CHILD = fileURLToPath(new URL('./ort-library-child.ts', import.meta.url))
const run = promisify(execFile)

interface ChildResult {
  ortLibrary: string
  steps: { loss: number; gradNorm: number }[]
  weights: string
  tokens: number[][]
  logprobs: number[][]
}

async function child(env: NodeJS.ProcessEnv): Promise<ChildResult> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', CHILD], { env, maxBuffer: 1 << 22 })
  return JSON.parse(stdout.trim().split('\n').at(-1) as string) as ChildResult
}

describe("ONNX Runtime's CUDA provider from PyPI", () => {
  const ortGpu = process.env[TEST_ENV.ortGpu] as string
  const homes: string[] = []
  after(() => Promise.all(homes.map((h) => rm(h, { recursive: true, force: true }))))
  const home = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'seedflow-cuda-'))
    homes.push(dir)
    return dir
  }

  it("gives onnxruntime-node's CPU results bit for bit with the wheel's library", async () => {
    assert.ok(ortGpu && cudaInstalled(), `${TEST_ENV.ortGpu} is not set or not installed: run through npm test`)
    const npm = await child(process.env)
    const wheel = await child(cudaEnvironment([ortGpu]))
    assert.match(npm.ortLibrary, /node_modules\/onnxruntime-node\//)
    assert.equal(wheel.ortLibrary, join(ortGpu, 'libonnxruntime.so.1'))
    assert.deepEqual(wheel.steps, npm.steps) // losses and gradient norms, every bit
    assert.equal(wheel.weights, npm.weights) // the trained tensors after three AdamW steps
    assert.deepEqual(wheel.tokens, npm.tokens)
    assert.deepEqual(wheel.logprobs, npm.logprobs)
    assert.ok(npm.steps[2] && npm.steps[0] && npm.steps[2].loss < npm.steps[0].loss, 'the steps trained')
  })

  it('a CUDA worker without the CUDA 13 runtime refuses to start, naming the library and the install', async () => {
    const r = await seedflow(['worker', 'train', '--execution-provider', 'cuda'], {
      ...process.env,
      SEEDFLOW_HOME: await home(),
    })
    assert.equal(r.code, 1, r.err)
    // the worker ran itself again with the wheel's library (bin.js), whose provider needs cuBLAS 13 first
    assert.match(
      r.err,
      /the cuda execution provider \(device 0\) is not available: libcublasLt\.so\.13 cannot be loaded/,
    )
    assert.ok(r.err.includes(join(ortGpu, 'libonnxruntime.so.1')), r.err)
    assert.ok(r.err.includes('`bash infra/install-cuda.sh --runtime=yes`'), r.err)
  })

  it('without the provider installed, the refusal names it and `bash infra/install-cuda.sh`', async () => {
    const r = await seedflow(['worker', 'train', '--execution-provider=cuda:1'], {
      ...process.env,
      SEEDFLOW_HOME: await home(),
      SEEDFLOW_CACHE_DIR: await home(), // an empty cache: nothing installed
    })
    assert.equal(r.code, 1, r.err)
    assert.match(r.err, /\(device 1\) is not available: libonnxruntime_providers_shared\.so cannot be loaded/)
    assert.ok(r.err.includes('`bash infra/install-cuda.sh`'), r.err)
  })
})
