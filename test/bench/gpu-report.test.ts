import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { compare, table } from '../../bench/gpu-report.ts'

describe('bench/gpu-report', () => {
  const ours = {
    date: 'd',
    steps: {
      environment: { node: 'v20' },
      'train: A': { stepSeconds: { median: 2, min: 1.5 }, mibPerStep: { hostDeviceTotal: 3.25 } },
      'train: B': { error: 'out of memory' },
      decode: { runs: [{ rows: 16, prompt: 101, tokens: 64, seconds: 4 }] },
    },
  }
  const torch = {
    date: 'd',
    steps: {
      'train: A': { stepSeconds: { median: 3, min: 2 } },
      'train: B': { stepSeconds: { median: 1, min: 1 } },
      decode: { runs: [{ rows: 16, prompt: 101, tokens: 64, seconds: 5 }] },
    },
  }

  it('pairs each figure of the check with torch’s, as torch ÷ seedflow of the medians', () => {
    const rows = compare(ours, torch)
    assert.deepEqual(
      rows.map((r) => [r.figure, r.ratio, r.note]),
      [
        ['A: trainer.step', 1.5, null],
        ['B: trainer.step', null, 'out of memory'],
        ['decode 16 × (101 + 64)', 1.25, null],
      ],
    )
    assert.equal(rows[0]?.hostDeviceMiBPerStep, 3.25)
    const md = table(rows)
    assert.match(md, /\| A: trainer\.step \| 2\.000 \| 3\.000 \| 1\.50× \| 3\.3 \|/)
    assert.match(md, /\| B: trainer\.step \| – \| 1\.000 \| – \| – \| out of memory \|/)
  })
})
