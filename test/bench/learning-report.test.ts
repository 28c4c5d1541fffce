import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { diagnosticsSection, legDiagnostics } from '../../bench/learning-diagnostics.ts'
import {
  comparisons,
  curvePoints,
  type LearningEntry,
  type LearningResults,
  learningTable,
  limits,
  SKILL_READING_RESULTS,
  skillReadingSection,
  writeLearningReport,
} from '../../bench/learning-report.ts'
import { seedInterval } from '../../bench/seed-interval.ts'

const at = (checkpoint: LearningEntry['checkpoint'], iteration: number, split: string, success: number) => ({
  checkpoint,
  iteration,
  split,
  success,
  score: success,
  episodes: 1000,
})

describe('learning report', () => {
  it('pairs each row with GRPO, each distillation row with seed without OPD under the same settings, ablations with their row', () => {
    const mix = 'stage2.stage1Mix={"steps":4}'
    const keys = [
      'grpo',
      'seed',
      'seed-oracle',
      'seed[stage2.opdCoef=0]',
      `seed[${mix}]`,
      `seed-oracle[${mix}]`,
      `seed[stage2.opdCoef=0,${mix}]`,
      'seed[stage2.opdBeta=1]',
      'seed-oracle[stage2.opdCoef=1,stage2.opdGate=control]',
      'seed-oracle[stage2.oraclePlan=step]',
    ]
    const pairs = comparisons(keys).map(([a, b]) => `${a} − ${b}`)
    for (const want of [
      'seed − grpo',
      'seed − seed[stage2.opdCoef=0]',
      'seed-oracle − seed[stage2.opdCoef=0]',
      `seed[${mix}] − seed[stage2.opdCoef=0,${mix}]`,
      `seed-oracle[${mix}] − seed[stage2.opdCoef=0,${mix}]`,
      'seed[stage2.opdBeta=1] − seed',
      // settings that shape the term alone do nothing without it: the pair is the row without the term
      'seed[stage2.opdBeta=1] − seed[stage2.opdCoef=0]',
      'seed-oracle[stage2.opdCoef=1,stage2.opdGate=control] − seed[stage2.opdCoef=0]',
      'seed-oracle[stage2.opdCoef=1,stage2.opdGate=control] − seed-oracle',
      // the teacher's plan too
      'seed-oracle[stage2.oraclePlan=step] − seed[stage2.opdCoef=0]',
      'seed-oracle[stage2.oraclePlan=step] − seed-oracle',
    ])
      assert.ok(pairs.includes(want), `${want} in ${pairs.join('; ')}`)
    assert.ok(!pairs.includes('seed[stage2.opdCoef=0] − seed'), 'the distillation pair is listed once')
    assert.ok(!pairs.includes(`seed-oracle[${mix}] − seed[stage2.opdCoef=0]`), 'only under the same settings')
  })

  it('reports micro and macro averages where evaluations recorded both', () => {
    const e = (checkpoint: LearningEntry['checkpoint'], iteration: number, success: number, macro: number) => ({
      ...at(checkpoint, iteration, 'test-unseen', success),
      macro,
      checkpointSha256: 'ab'.repeat(32),
    })
    const table = learningTable({
      household: {
        grpo: { '1': [e('warm-start', 0, 0.1, 0.05), e('iteration', 4, 0.2, 0.12), e('iteration', 8, 0.3, 0.15)] },
      },
    })
    assert.match(table, /\| household \| grpo \| 1 \| test-unseen \| micro \| 10\.0 \| – \| 30\.0 \| 20\.0 \|/)
    assert.match(table, /\| household \| grpo \| 1 \| test-unseen \| macro \| 5\.0 \| – \| 15\.0 \| 10\.0 \|/)
  })

  it('flags a pair whose legs started from different warm-start checkpoints', () => {
    const leg = (sha: string, final: number) => [
      { ...at('warm-start', 0, 'test-seen', 0.3), checkpointSha256: sha },
      { ...at('iteration', 12, 'test-seen', final), checkpointSha256: 'f'.repeat(64) },
    ]
    const same = learningTable({ sokoban: { grpo: { '1': leg('a', 0.4) }, seed: { '1': leg('a', 0.5) } } })
    assert.match(same, /seed − grpo = 10\.0 points \(seeds 1\)\n/)
    const other = learningTable({ sokoban: { grpo: { '1': leg('a', 0.4) }, seed: { '1': leg('b', 0.5) } } })
    assert.match(other, /seed − grpo = 10\.0 points \(seeds 1\) \[different warm-start checkpoints: seeds 1\]/)
  })

  it('gives the 95% t-interval over seeds (hand-computed), none for one seed', () => {
    // mean 0.4, sample sd 0.1, n = 3: 4.303 · 0.1 / √3 = 0.24844
    const m = seedInterval([0.3, 0.4, 0.5])
    assert.ok(Math.abs(m.mean - 0.4) < 1e-12)
    assert.ok(Math.abs((m.half ?? 0) - 0.248434) < 1e-5, String(m.half))
    assert.deepEqual(seedInterval([0.25]), { mean: 0.25, half: null, n: 1 })
  })

  it('tables start and final success per row and the paired SEED − GRPO difference', () => {
    const results: LearningResults = {
      sokoban: {
        grpo: {
          '1': [
            at('warm-start', 0, 'test-seen', 0.3),
            at('iteration', 4, 'test-seen', 0.35),
            at('iteration', 12, 'test-seen', 0.4),
          ],
          '2': [at('warm-start', 0, 'test-seen', 0.2), at('iteration', 12, 'test-seen', 0.3)],
        },
        seed: {
          '1': [
            at('warm-start', 0, 'test-seen', 0.3),
            at('stage1', 0, 'test-seen', 0.28),
            at('iteration', 12, 'test-seen', 0.5),
          ],
          '2': [
            at('warm-start', 0, 'test-seen', 0.2),
            at('stage1', 0, 'test-seen', 0.22),
            at('iteration', 12, 'test-seen', 0.36),
          ],
        },
        'seed[stage2.opdCoef=0]': {
          '1': [at('iteration', 12, 'test-seen', 0.54)],
          '2': [at('iteration', 12, 'test-seen', 0.38)],
        },
      },
    }
    const table = learningTable(results)
    // grpo final: mean 0.35, sd 0.0707, t(1) = 12.706: half 0.635
    assert.match(
      table,
      /\| sokoban \| grpo \| 1, 2 \| test-seen \| micro \| 25\.0 ± 63\.5 \| – \| 35\.0 ± 63\.5 \| 10\.0 ± 0\.0 \|/,
    )
    assert.match(
      table,
      /\| sokoban \| seed \| 1, 2 \| test-seen \| micro \| 25\.0 ± 63\.5 \| 25\.0 ± 38\.1 \| 43\.0 ± 88\.9 \| 18\.0 ± 25\.4 \|/,
    )
    // paired differences 0.1 and 0.06: mean 0.08, sd 0.02828, half 12.706 · 0.02 = 0.2541
    assert.match(table, /test-seen \(micro\): seed − grpo = 8\.0 ± 25\.4 points \(seeds 1, 2\)/)
    // the ablation against GRPO (0.14, 0.08: mean 0.11, sd 0.04243, half 0.3812), and the distillation: seed
    // against the same row without OPD (−0.04, −0.02), listed once
    assert.match(table, /seed\[stage2\.opdCoef=0\] − grpo = 11\.0 ± 38\.1 points \(seeds 1, 2\)/)
    assert.match(table, /\(micro\): seed − seed\[stage2\.opdCoef=0\] = -3\.0 ± 12\.7 points \(seeds 1, 2\)/)
    assert.doesNotMatch(table, /seed\[stage2\.opdCoef=0\] − seed /)
    assert.doesNotMatch(table, /\| macro \|/, 'no macro rows where no evaluation recorded one')
    const oneFamily = learningTable({
      sokoban: { grpo: { '1': [{ ...at('warm-start', 0, 'test-seen', 0.3), macro: 0.3 }] } },
    })
    assert.doesNotMatch(oneFamily, /\| macro \|/, 'no macro rows where macro and micro agree (one family)')
    const balanced = learningTable({
      household: { grpo: { '1': [{ ...at('warm-start', 0, 'test-unseen', 0.3), macro: 0.3, families: 6 }] } },
    })
    assert.match(
      balanced,
      /\| household \| grpo \| 1 \| test-unseen \| macro \| 30\.0 \|/,
      'equal averages of six families',
    )
    const points = curvePoints(results)
    // seed's curve starts at Stage 1; grpo's at the warm-start, with its one-seed point at 4 iterations
    assert.deepEqual(
      points.filter((p) => p.row === 'seed').map((p) => [p.iteration, Number(p.mean.toFixed(6))]),
      [
        [0, 25],
        [12, 43],
      ],
    )
    assert.deepEqual(
      points.filter((p) => p.row === 'grpo').map((p) => [p.iteration, Number(p.mean.toFixed(6))]),
      [
        [0, 25],
        [4, 35],
        [12, 35],
      ],
    )
  })
})

describe('learning diagnostics per leg', () => {
  const it4 = (parse: number | null, expert: number, other: number, gate: number, opd: number, pg: number) => ({
    metrics: {
      'analyze/parse_rate': parse,
      'rescore/teacher_gap_expert': expert,
      'rescore/teacher_gap_other': other,
      'update/opd_gate_mean': gate,
      'update/opd_loss': opd,
      'update/pg_loss': pg,
    },
  })

  it('sums up parse rate by thirds, expert-gap wins, gate range and the OPD term beside L_pg (hand-computed)', () => {
    const leg = {
      config: { stage2: { opdCoef: 0.1 } },
      iterations: [
        it4(0.9, -1, -2, 0.4, 0.02, -0.2),
        it4(0.6, -1, -0.5, 0.45, 0.01, 0.1),
        null,
        it4(0.3, -0.2, -0.4, 0.5, 0.03, -0.3),
      ],
    }
    const d = legDiagnostics('sokoban', 'seed', '1', leg)
    assert.equal(d.iterations, 3)
    assert.equal(d.parseFirst, 0.9)
    assert.equal(d.parseLast, 0.3)
    assert.deepEqual([d.expertAbove, d.withGaps], [2, 3])
    assert.deepEqual([d.gateMin, d.gateMax], [0.4, 0.5])
    assert.ok(Math.abs((d.opdShare ?? 0) - 0.01) < 1e-12) // 0.01, 0.01, 0.01
    const md = diagnosticsSection([d])
    assert.match(md, /\| sokoban \| seed \| 1 \| 3 \| 0\.90 → 0\.30 \| 2 of 3 \| 0\.400–0\.500 \| 1\.0e-2 \| – \|/)
    assert.equal(diagnosticsSection([]), '')
  })

  it('with the control gate, averages the control gaps and counts the iterations the expert side is above', () => {
    const control = (expert: number, other: number) => ({
      metrics: { 'rescore/control_gap_expert': expert, 'rescore/control_gap_other': other },
    })
    const d = legDiagnostics('sokoban', 'seed[stage2.opdGate=control]', '1', {
      iterations: [control(0.1, -0.3), control(-0.2, 0.1), { metrics: {} }],
    })
    assert.deepEqual([d.controlAbove, d.controlPositive, d.withControlGaps], [1, 1, 2])
    assert.ok(Math.abs((d.controlExpert ?? 0) + 0.05) < 1e-12 && Math.abs((d.controlOther ?? 0) + 0.1) < 1e-12)
    assert.match(diagnosticsSection([d]), /\| -0\.05 \/ -0\.10 \(1 of 2 above; 1 of 2 > 0\) \|\n$/)
    const positive = legDiagnostics('sokoban', 'seed-oracle', '1', { iterations: [control(0.2, 0.3), control(0.1, 0)] })
    assert.deepEqual([positive.controlAbove, positive.controlPositive], [1, 2])
  })

  it('leaves out what a row does not record (no analyzer, no teacher)', () => {
    const d = legDiagnostics('sokoban', 'grpo', '1', {
      iterations: [{ metrics: { 'update/pg_loss': -0.1 } }],
    })
    assert.deepEqual([d.parseFirst, d.withGaps, d.gateMin, d.opdShare, d.withControlGaps], [null, 0, null, null, 0])
  })
})

describe('which limit', () => {
  const leg = (row: string, seed: string, parse: [number, number]) => ({
    ...legDiagnostics('household', row, seed, {
      config: { stage2: { opdCoef: row.includes('opdCoef=0') ? 0 : 0.1 } },
      iterations: [
        {
          metrics: {
            'analyze/parse_rate': parse[0],
            'rescore/teacher_gap_expert': -1,
            'rescore/teacher_gap_other': -2,
          },
        },
        {
          metrics: {
            'analyze/parse_rate': parse[1],
            'rescore/teacher_gap_expert': -2,
            'rescore/teacher_gap_other': -1,
          },
        },
        {
          metrics: {
            'analyze/parse_rate': parse[1],
            'update/opd_gate_mean': 0.49,
            'update/opd_loss': 0.01,
            'update/pg_loss': 0.5,
          },
        },
      ],
    }),
  })
  // final success per seed: oracle − off = +10, +12, +11 points (an interval above 0); seed − off = 0, +1, −1
  const final = (success: number) => [
    { ...at('warm-start', 0, 'test-unseen', 0.05), macro: 0.05, families: 6, checkpointSha256: 'ab'.repeat(32) },
    { ...at('iteration', 12, 'test-unseen', success), macro: success, families: 6 },
  ]
  const rows = (oracle: number[]): LearningResults => ({
    household: {
      seed: { '1': final(0.2), '2': final(0.21), '3': final(0.19) },
      'seed[stage2.opdCoef=0]': { '1': final(0.2), '2': final(0.2), '3': final(0.2) },
      'seed-oracle': { '1': final(oracle[0] ?? 0), '2': final(oracle[1] ?? 0), '3': final(oracle[2] ?? 0) },
    },
  })
  const legs = ['1', '2', '3'].flatMap((s) => [
    leg('seed', s, [0.8, 0.4]),
    leg('seed[stage2.opdCoef=0]', s, [0.8, 0.9]),
    leg('seed-oracle', s, [0.8, 0.8]),
  ])

  it('names skill quality when correct skills gain and self-written ones do not, with the figures it read', () => {
    const md = limits(rows([0.3, 0.32, 0.31]), legs)
    assert.match(md, /### Which limit: household \(test-unseen, macro\)/)
    assert.match(md, /`seed-oracle` − `seed\[stage2\.opdCoef=0\]` = 11\.0 ± 2\.5 points \(seeds 1, 2, 3\)/)
    assert.match(md, /in 3 of 6 iterations with oracle skills, 3 of 6 iterations with self-written ones/)
    assert.match(
      md,
      /under `seed`, the parse rate [^;]* falls in 3 of 3 legs \(mean 0\.80 → 0\.40\); under `seed\[stage2\.opdCoef=0\]`, the parse rate [^;]* falls in 0 of 3 legs/,
    )
    assert.match(md, /λ·L_opd \/ \|L_pg\| per leg 2\.0e-3–2\.0e-3/)
    assert.match(md, /verdict: \*\*skill quality\*\*/)
  })

  it('names signal strength when even correct skills show no gain, and says nothing without an upper bound', () => {
    assert.match(limits(rows([0.21, 0.19, 0.2]), legs), /verdict: \*\*signal strength\*\*/)
    const none = rows([0.2, 0.2, 0.2])
    delete none.household?.['seed-oracle']
    assert.equal(limits(none, legs), '')
    const one = rows([0.3, 0.32, 0.31])
    for (const row of Object.values(one.household ?? {})) for (const s of ['2', '3']) delete row[s]
    assert.match(limits(one, legs), /verdict: none yet: one paired seed gives no interval/)
  })

  it('says where no analyzer answer ever parsed, and names the start a second set of rows shares', () => {
    const silent = ['1', '2', '3'].flatMap((s) => [
      leg('seed', s, [0, 0]),
      leg('seed[stage2.opdCoef=0]', s, [0, 0]),
      leg('seed-oracle', s, [0, 0]),
    ])
    const md = limits(rows([0.21, 0.19, 0.2]), silent, 'from the skill-reading start')
    assert.match(md, /### Which limit: household \(test-unseen, macro\), from the skill-reading start\n/)
    assert.match(
      md,
      /under `seed`, no analyzer answer parses \(rate 0 in every iteration of 3 legs: no self-written skill\)/,
    )
    // a leg whose middle iteration parsed is not silent: it falls from its first third to its last
    const once = silent.map((d) => (d.row === 'seed' ? { ...d, parseMax: 0.2 } : d))
    assert.match(limits(rows([0.21, 0.19, 0.2]), once), /under `seed`, the parse rate [^;]* falls in 0 of 3 legs/)
  })
})

describe('the comparison from the skill-reading start in learning.md', () => {
  it('renders learning-contrastive.json beside the main results, and nothing where it is absent', () => {
    const dir = mkdtempSync(join(tmpdir(), 'skill-reading-'))
    assert.equal(skillReadingSection(dir), '')
    const leg = (success: number) => [at('warm-start', 0, 'test-seen', 0.6), at('iteration', 12, 'test-seen', success)]
    const results: LearningResults = {
      sokoban: {
        'seed-oracle': { '1': leg(0.66), '2': leg(0.7) },
        'seed[stage2.opdCoef=0]': { '1': leg(0.65), '2': leg(0.7) },
      },
    }
    writeFileSync(join(dir, `${SKILL_READING_RESULTS}.json`), JSON.stringify(results))
    const md = skillReadingSection(dir)
    assert.match(md, /## The comparison from the skill-reading start \(issue 46\)/)
    assert.match(md, /\| sokoban \| seed-oracle \| 1, 2 \| test-seen \| micro \| 60\.0 ± 0\.0 \| – \| 68\.0 ± 25\.4 \|/)
    assert.match(md, /seed-oracle − seed\[stage2\.opdCoef=0\] = 0\.5 ± 6\.4 points \(seeds 1, 2\)/)
    assert.match(md, /### Which limit: sokoban \(test-seen, micro\), from the skill-reading start/)
  })

  it('rewrites learning.md whenever a leg from that start is written, and returns every file written', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'skill-reading-'))
    const leg = (success: number) => [at('warm-start', 0, 'test-seen', 0.6), at('iteration', 12, 'test-seen', success)]
    writeFileSync(join(dir, 'learning.json'), JSON.stringify({ sokoban: { grpo: { '1': leg(0.5) } } }))
    const contrastive = join(dir, `${SKILL_READING_RESULTS}.json`)
    const results: LearningResults = { sokoban: { grpo: { '1': leg(0.7) } } }
    writeFileSync(contrastive, JSON.stringify(results))
    const written = await writeLearningReport(contrastive, results)
    assert.deepEqual(
      written.map((p) => p.slice(dir.length + 1)),
      [`${SKILL_READING_RESULTS}.md`, `${SKILL_READING_RESULTS}.svg`, 'learning.md', 'learning.svg'],
    )
    const main = readFileSync(join(dir, 'learning.md'), 'utf8')
    assert.match(main, /\| sokoban \| grpo \| 1 \| test-seen \| micro \| 60\.0 \| – \| 50\.0 \|/)
    assert.match(
      main,
      /## The comparison from the skill-reading start[\s\S]*\| sokoban \| grpo \| 1 \| test-seen \| micro \| 60\.0 \| – \| 70\.0 \|/,
    )
  })
})
