import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { between, MarkerError, replaceBetween, unpadTables, wrap } from '../../bench/readme-markers.ts'
import { PERFORMANCE, performanceBlock, readTargets, type Targets } from '../../bench/readme-performance.ts'
import { PROJECT_ROOT } from '../../infra/tools.ts'

const targets: Targets = {
  issue: 19,
  measuredAt: '2026-12-01',
  source: 'compare',
  ratio: 'torch / seedflow',
  rows: [
    { figure: 'train step', target: '>= 1.3x', measured: 1.128, met: false, limit: 'the GEMMs | the rest' },
    { figure: 'share', target: '>= 70%', measured: { bench: 0.67, smollm2: 0.71 }, met: 'SmolLM2 yes' },
    { figure: 'peak RSS', target: '< 6 GB', measured: { recomputeLayers: 3.4 }, met: true, note: 'a note' },
    { figure: 'main job', target: '<= 20 min', measured: null, met: false },
  ],
}

describe('performanceBlock', () => {
  it('writes each row in the unit of its target, escaping pipes', () => {
    assert.deepEqual(performanceBlock(targets).split('\n').slice(2, 6), [
      '| train step | ≥ 1.3× | 1.13× | no | the GEMMs \\| the rest |',
      '| share | ≥ 70% | 67% bench, 71% smollm2 | SmolLM2 yes |  |',
      '| peak RSS | < 6 GB | 3.4 GiB recomputeLayers | yes | a note |',
      '| main job | ≤ 20 min | not measured | no |  |',
    ])
  })

  it('changes when a measured figure changes', () => {
    const [first, ...rest] = targets.rows
    const changed = { ...targets, rows: [{ ...(first as (typeof targets.rows)[0]), measured: 1.2 }, ...rest] }
    assert.notEqual(performanceBlock(changed), performanceBlock(targets))
  })
})

describe('README performance table', () => {
  it('is what npm run readme:performance writes from bench/results/engine.json', () => {
    const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8')
    assert.equal(unpadTables(between(readme, PERFORMANCE, 'README.md')), unpadTables(performanceBlock(readTargets())))
  })

  it('compares tables without the padding the formatter adds, and still sees a changed cell', () => {
    const plain = '| a | bb |\n| --- | ---: |\n| 1 | 2 |'
    const padded = '| a   | bb  |\n| --- | --: |\n| 1   |   2 |'
    assert.equal(unpadTables(padded), unpadTables(plain))
    assert.notEqual(unpadTables(padded.replace('2 |', '3 |')), unpadTables(plain))
  })
})

describe('README markers', () => {
  it('replace only what lies between them', () => {
    const text = 'a\n<!-- t:begin -->\nold\n<!-- t:end -->\nb\n'
    assert.equal(replaceBetween(text, 't', 'new\n'), 'a\n<!-- t:begin -->\nnew\n<!-- t:end -->\nb\n')
    assert.equal(between(replaceBetween(text, 't', 'new'), 't'), 'new')
  })

  it('refuse a document without them', () => {
    assert.throws(() => between('a\n<!-- t:end -->\n', 't', 'x.md'), {
      name: 'MarkerError',
      message:
        'x.md needs exactly one <!-- t:begin --> followed by one <!-- t:end --> (found 0 begin at -1, 1 end at 2)',
    })
    assert.throws(() => replaceBetween('<!-- t:begin --><!-- t:begin --><!-- t:end -->', 't', ''), MarkerError)
  })

  it('wrap lines at spaces, never inside an inline code span', () => {
    assert.equal(wrap('one two `npm run x -- --y` three', 12), 'one two\n`npm run x -- --y`\nthree')
  })
})
