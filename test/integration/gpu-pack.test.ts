// The GPU check's pack (bench/gpu-pack.ts), proven on the CPU: part 1 (Node, the PyPI wheel's ORT library, the check
// bundled by esbuild) unpacks into a stash and runs the whole check end to end with its own Node and library, on the
// CPU provider, on the smoke plan. Part 2 (the CUDA provider, sm_90 only) needs the workplace's transport helper
// and a GPU: it is not packed here.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { pack } from '../../bench/gpu-pack.ts'

const run = promisify(execFile)

describe('the GPU check pack, on the CPU', () => {
  const dirs: string[] = []
  after(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))))

  it('part 1 unpacks and runs the smoke check with its own Node and ORT library', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'seedflow-gpu-pack-'))
    dirs.push(dir)
    const [part1] = await pack(join(dir, 'pack'))
    assert.ok(part1)
    const stash = join(dir, 'stash')
    const out = join(dir, 'gpu.json')
    const { stdout } = await run(
      'sh',
      [join(part1, 'run.sh'), '--execution-provider', 'cpu', '--plan', 'smoke', '--out', out, '--threads', '1'],
      { env: { ...process.env, SEEDFLOW_STASH: stash }, maxBuffer: 1 << 22 },
    )
    assert.match(stdout, /gpu-pack: part 1 unpacked into/)
    const report = JSON.parse(await readFile(out, 'utf8')) as { steps: Record<string, Record<string, unknown>> }
    const env = report.steps.environment as { nodeBinary: string; ortLibrary: string }
    assert.equal(env.nodeBinary, join(stash, 'node'))
    assert.equal(env.ortLibrary, join(stash, 'node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1'))
    const names = Object.keys(report.steps)
    assert.deepEqual(names, [
      'environment',
      'placement',
      'guard',
      'parity',
      'train: tiny LoRA r 4, 2 × 32',
      'train: tiny full, 2 × 32',
      'train: tiny full, 2 × 32, native',
      'decode',
    ])
    for (const name of names)
      assert.equal(report.steps[name]?.error, undefined, `${name}: ${report.steps[name]?.error}`)
    assert.equal(report.steps.guard?.applies, false, 'a CPU session has no fallback to guard against')
    const parity = report.steps.parity as { met: Record<string, boolean> }
    assert.deepEqual(parity.met, { loss: true, gradNorm: true, logprobs: true, tokens: true })
    const full = report.steps['train: tiny full, 2 × 32'] as {
      losses: number[]
      mibPerStep: { keptStateEachWay: number }
    }
    assert.ok((full.losses.at(-1) as number) < (full.losses[0] as number), 'the full steps trained')
    assert.ok(full.mibPerStep.keptStateEachWay > 30, 'weights and both moments of 3.5M parameters cross each way')
    const native = report.steps['train: tiny full, 2 × 32, native'] as typeof full
    for (const [i, loss] of native.losses.entries())
      assert.ok(Math.abs(loss - (full.losses[i] as number)) < 1e-5 * Math.abs(loss), `step ${i}: the same training`)
    assert.equal(native.mibPerStep.keptStateEachWay, 0, 'what the native engine keeps stays where it runs')
  })
})
