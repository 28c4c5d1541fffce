// learning.md's premise section (bench/premise-report.ts): the designs of bench/skill-reading.mts, the follow
// check, and the premise at the benchmark's starts, each figure beside the bar.
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { premiseSection } from '../../bench/premise-report.ts'
import type { GapFigure, SkillGapResult } from '../../compute/skill-gap.ts'

const gap = (perStep: number): GapFigure => ({ perStep, perTask: perStep, half: 0.05, positive: 150, tasks: 200 })
const result = (ownVsOther: number): SkillGapResult => ({
  tasks: 200,
  won: 200,
  steps: 1091,
  blockDropped: 0,
  logprob: { none: -0.6, own: -0.4, other: -1.3, ownRule: -1, otherRule: -1 },
  gaps: { ownVsOther: gap(ownVsOther), ownVsNone: gap(0.15), ruleOwnVsOther: gap(0), ruleVsNone: gap(-0.4) },
  seconds: 15,
})

describe('premise section', () => {
  const dir = mkdtempSync(join(tmpdir(), 'seedflow-premise-'))
  after(() => rmSync(dir, { recursive: true, force: true }))

  it('is empty without designs, and puts each design and each start beside the bar', () => {
    const lines = join(dir, 'skill-reading.jsonl')
    assert.equal(premiseSection(lines), '')
    const design = {
      label: 'blind',
      date: '2026-12-05',
      seed: 1,
      set: ['warmstart.skillBlind=0.5'],
      warmstart: { seconds: 2534, checks: [{ step: 720, successRate: 0.6 }] },
      skillGap: result(0.877),
      validationSuccess: { tasks: 500, success: 0.536 },
    }
    writeFileSync(
      lines,
      `${JSON.stringify(design)}\n${JSON.stringify({ ...design, label: 'preset', set: [], skillGap: result(0.021) })}\n`,
    )
    mkdirSync(join(dir, 'premise-starts'))
    const start = { checkpoint: {}, split: 'validation', seeds: { from: 0, to: 200 }, result: result(0.412) }
    writeFileSync(join(dir, 'premise-starts', 'cs-sokoban-s1-stage1-stage1.json'), JSON.stringify(start))
    const md = premiseSection(lines)
    assert.match(md, /\| blind \| 1 \| warmstart\.skillBlind=0\.5 \| step 720, 2534 s \| 53\.6 \| \+0\.877 .*\| met \|/)
    assert.match(md, /\| preset \| 1 \| preset \|.*\| \+0\.021 .*\| missed \|/)
    assert.match(
      md,
      /\| cs-sokoban-s1-stage1-stage1 \| validation 0–199 \(200 won, 1091 steps\) \| \+0\.412 \(\+0\.412 ± 0\.050; 150\/200\) \|.*\| missed \|/,
    )
  })
})
