import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  ALGORITHM_NAMES,
  ALGORITHMS,
  type AlgorithmRow,
  needsLibrary,
  needsStage1,
  rowProblems,
} from '../../seed/index.ts'

describe('algorithm table', () => {
  it('has exactly the rows of docs/algorithm.md §12', () => {
    assert.deepEqual([...ALGORITHM_NAMES].sort(), [
      'grpo',
      'grpo-opsd',
      'seed',
      'seed-library',
      'seed-no-sft',
      'seed-oracle',
      'seed-static',
      'skill-grpo',
      'skill-prompt',
    ])
  })

  for (const name of ALGORITHM_NAMES) {
    it(`row ${name} is consistent`, () => {
      assert.deepEqual(rowProblems(ALGORITHMS[name]), [])
    })
  }

  it('the consistency check catches a broken row (it can fail)', () => {
    const broken: AlgorithmRow = { ...ALGORITHMS.seed, phases: ['snapshot', 'rollout', 'rescore', 'update'] }
    assert.ok(rowProblems(broken).some((p) => p.includes('analyze runs exactly when a model writes the skill')))
    const noTeacher: AlgorithmRow = { ...ALGORITHMS.seed, teacherContext: 'none' }
    assert.ok(rowProblems(noTeacher).some((p) => p.includes('OPD is on exactly when there is a teacher context')))
    const unordered: AlgorithmRow = { ...ALGORITHMS.grpo, phases: ['rollout', 'snapshot', 'rescore', 'update'] }
    assert.ok(rowProblems(unordered).some((p) => p.includes('not in iteration order')))
  })

  it('seed: Stage 1 start, all five phases, π_k analyzes, teacher on prompt + skill, every loss term', () => {
    const row = ALGORITHMS.seed
    assert.deepEqual(row.phases, ['snapshot', 'rollout', 'analyze', 'rescore', 'update'])
    assert.equal(row.analyzer, 'current')
    assert.equal(row.teacherContext, 'prompt+skill')
    assert.deepEqual(row.loss, { kl: true, entropy: true, opd: true })
    assert.equal(row.evaluationSkill, 'none')
    assert.ok(needsStage1(row))
  })

  it('grpo: base start, no analyze, old and reference log-probs only, no OPD', () => {
    const row = ALGORITHMS.grpo
    assert.deepEqual(row.phases, ['snapshot', 'rollout', 'rescore', 'update'])
    assert.deepEqual(row.rescore, { old: true, ref: true, teacher: false })
    assert.equal(row.loss.opd, false)
    assert.ok(!needsStage1(row) && !needsLibrary(row))
  })

  it('skill-prompt evaluates only, with a library skill in the prompt', () => {
    const row = ALGORITHMS['skill-prompt']
    assert.equal(row.rl, false)
    assert.deepEqual(row.phases, [])
    assert.equal(row.loss, null)
    assert.equal(row.evaluationSkill, 'library')
    assert.ok(needsLibrary(row))
  })

  it('skill-grpo acts with a library skill and trains without OPD', () => {
    const row = ALGORITHMS['skill-grpo']
    assert.equal(row.actingSkill, 'library')
    assert.equal(row.loss.opd, false)
    assert.equal(row.evaluationSkill, 'library')
  })

  it('grpo-opsd distills from raw hindsight without an analyze phase', () => {
    const row = ALGORITHMS['grpo-opsd']
    assert.ok(!(row.phases as readonly string[]).includes('analyze'))
    assert.equal(row.skillSource, 'raw-hindsight')
    assert.equal(row.teacherContext, 'prompt+raw-trajectory')
    assert.equal(row.loss.opd, true)
  })

  it('seed-static analyzes with π_0, seed-library reads the library, seed-no-sft starts from the base', () => {
    assert.equal(ALGORITHMS['seed-static'].analyzer, 'stage1')
    assert.equal(ALGORITHMS['seed-library'].skillSource, 'library')
    assert.ok(!(ALGORITHMS['seed-library'].phases as readonly string[]).includes('analyze'))
    assert.equal(ALGORITHMS['seed-no-sft'].start, 'base')
    assert.deepEqual(ALGORITHMS['seed-no-sft'].phases, ALGORITHMS.seed.phases)
  })

  it('only skill-prompt and skill-grpo put a skill in the evaluation prompt', () => {
    const withSkill = ALGORITHM_NAMES.filter((n) => ALGORITHMS[n].evaluationSkill !== 'none').sort()
    assert.deepEqual(withSkill, ['skill-grpo', 'skill-prompt'])
  })
})
