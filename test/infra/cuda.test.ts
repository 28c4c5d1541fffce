import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { asksForCuda, cudaEnvironment, cudaRemedy } from '../../infra/cuda.ts'

describe('infra/cuda', () => {
  it('tells a command line that asks for CUDA, the option before its environment variable', () => {
    const none = {}
    assert.equal(asksForCuda(['worker', 'train', '--execution-provider', 'cuda'], none), true)
    assert.equal(asksForCuda(['worker', '--execution-provider=cuda:2'], none), true)
    assert.equal(asksForCuda(['worker', '--execution-provider', 'cpu'], none), false)
    assert.equal(asksForCuda(['worker', '--execution-provider', 'cudax'], none), false)
    assert.equal(asksForCuda(['worker'], none), false)
    assert.equal(asksForCuda(['worker'], { SEEDFLOW_EXECUTION_PROVIDER: 'cuda:0' }), true)
    assert.equal(asksForCuda(['worker', '--execution-provider', 'cpu'], { SEEDFLOW_EXECUTION_PROVIDER: 'cuda' }), false)
    assert.equal(asksForCuda(['run', 'cuda'], none), false)
  })

  it("puts the provider's folders first on LD_LIBRARY_PATH, once", () => {
    const env = cudaEnvironment(['/c/ort', '/c/rt'], { LD_LIBRARY_PATH: '/usr/x:/c/ort:', HOME: '/h' })
    assert.equal(env.LD_LIBRARY_PATH, '/c/ort:/c/rt:/usr/x')
    assert.equal(env.HOME, '/h')
    assert.equal(cudaEnvironment(['/c/ort'], {}).LD_LIBRARY_PATH, '/c/ort')
  })

  it('says what installs each kind of missing library', () => {
    assert.match(
      cudaRemedy({ library: 'libonnxruntime_providers_cuda.so', kind: 'provider' }),
      /`bash infra\/install-cuda\.sh`/,
    )
    assert.match(
      cudaRemedy({ library: 'libcudnn.so.9', kind: 'runtime' }),
      /--runtime=yes`, or put the folder of this machine's libcudnn\.so\.9/,
    )
    assert.match(cudaRemedy({ library: 'libcuda.so.1', kind: 'driver' }), /no NVIDIA driver/)
  })
})
