import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { episodeSkillBlock, findPlacement, hindsightBlock, insertBlock, insertSkill } from '../../seed/index.ts'

const BLOCK =
  '**Episode-Level Skill**\n' +
  'Refer to this episode-level skill when deciding what action to take in the current episode:\n' +
  '[Clean the mug before placing it.]'
const SKILL = '  Clean the mug before placing it.  '

describe('skill block', () => {
  it('is the bold title, the instruction sentence and the bracketed skill', () => {
    assert.equal(episodeSkillBlock(SKILL), BLOCK)
  })

  it('is empty for a blank skill, which leaves the prompt unchanged', () => {
    assert.equal(episodeSkillBlock('  \n '), '')
    assert.equal(insertSkill('Your task is to: x\nNow act.', '  '), 'Your task is to: x\nNow act.')
  })

  it('has a hindsight variant for raw trajectories', () => {
    assert.match(hindsightBlock('Step 0 …'), /^\*\*Successful Attempt\*\*\n.*:\n\[Step 0 …\]$/)
    assert.equal(hindsightBlock(' '), '')
  })
})

describe('skill insertion', () => {
  it('goes right after the "Your task is to:" line, as its own paragraph', () => {
    const prompt = 'You are an expert agent. Your task is to: put a clean mug in coffeemachine 1\nPrior to this step…'
    assert.equal(
      insertSkill(prompt, SKILL),
      `You are an expert agent. Your task is to: put a clean mug in coffeemachine 1\n\n${BLOCK}\n\nPrior to this step…`,
    )
  })

  it('handles each task anchor', () => {
    const anchors = [
      ['Your task is to:', 'Your task is to: find a key'],
      ['Your current task is:', 'Your current task is: buy red shoes'],
      ['Your task is:', 'Your task is: buy red shoes'],
      ['Your question:', 'Your question: who wrote Hamlet?'],
      ['Your goal is', 'Sokoban. Your goal is to push every box onto a target.'],
    ] as const
    for (const [anchor, line] of anchors) {
      const prompt = `Intro line.\n${line}\nCurrent observation: …\nNow it's your turn to act.`
      assert.deepEqual(findPlacement(prompt), {
        kind: 'after-task-line',
        anchor,
        index: prompt.indexOf(line) + line.length + 1,
      })
      assert.equal(
        insertSkill(prompt, SKILL),
        `Intro line.\n${line}\n\n${BLOCK}\n\nCurrent observation: …\nNow it's your turn to act.`,
        anchor,
      )
    }
  })

  it('prefers the higher-priority task pattern over an earlier line with a lower one', () => {
    const prompt = 'Your question: ignored\nYour task is to: chosen\nend'
    const placement = findPlacement(prompt)
    assert.ok(placement.kind === 'after-task-line' && placement.anchor === 'Your task is to:')
    assert.equal(insertSkill(prompt, SKILL), `Your question: ignored\nYour task is to: chosen\n\n${BLOCK}\n\nend`)
  })

  it('without a task line, goes before "Now it\'s your turn"', () => {
    const prompt = "Formula: 3 *\nCards: 4 and 3\n\nNow it's your turn: append one element."
    assert.equal(
      insertSkill(prompt, SKILL),
      `Formula: 3 *\nCards: 4 and 3\n\n${BLOCK}\n\nNow it's your turn: append one element.`,
    )
    const placement = findPlacement(prompt)
    assert.ok(placement.kind === 'before-turn' && placement.anchor === "Now it's your turn")
    const toPrompt = "Board:\n#_#\nNow it's your turn to move."
    const toPlacement = findPlacement(toPrompt)
    assert.ok(toPlacement.kind === 'before-turn' && toPlacement.anchor === "Now it's your turn to")
  })

  it('without any anchor, is appended at the end; an empty prompt becomes the block', () => {
    assert.equal(insertSkill('Just an observation.  \n', SKILL), `Just an observation.\n\n${BLOCK}`)
    assert.equal(insertSkill('', SKILL), BLOCK)
    assert.deepEqual(findPlacement('nothing'), { kind: 'end' })
  })

  it('a task line at the very end gets the block after it, with no trailing text', () => {
    assert.equal(
      insertSkill('Household. Your task is to: heat an egg', SKILL),
      `Household. Your task is to: heat an egg\n\n${BLOCK}`,
    )
  })

  it('a task anchor must start a word ("XYour task is to:" does not match)', () => {
    assert.deepEqual(findPlacement('XYour task is to: nope'), { kind: 'end' })
  })

  it('keeps the rest of the prompt intact: removing the block gives back the original paragraphs', () => {
    const prompt = "Your task is to: a\n\n\nhistory line\nNow it's your turn to act."
    const out = insertBlock(prompt, 'BLOCK')
    assert.equal(out, "Your task is to: a\n\nBLOCK\n\nhistory line\nNow it's your turn to act.")
  })
})
