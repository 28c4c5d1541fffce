import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  type AnalyzerEpisode,
  analyzerPrompt,
  episodeSkillBlock,
  type FitResult,
  fitAnalyzerPrompt,
  fitStepPrompt,
  HISTORY_ENTRY,
  insertSkill,
  promptBudget,
  renderLayout,
  SeedInputError,
  splitHistory,
  tallyFits,
} from '../../seed/index.ts'

/** A stand-in tokenizer: one token per whitespace-separated word. */
const words = (text: string) => text.split(/\s+/).filter(Boolean).length

const TASK_LINE = 'You are an expert agent in the household. Your task is to: put a clean mug in coffeemachine 1'
const ENTRIES = [
  "[Observation 1: 'You are in the middle of a room.', Action 1: 'go to sink 1']",
  "[Observation 2: 'You arrive at sink 1.\nOn the sink 1, you see a mug 1.', Action 2: 'take mug 1 from sink 1']",
  "[Observation 3: 'You pick up the mug 1.', Action 3: 'clean mug 1 with sink 1']",
]
const PROMPT = [
  TASK_LINE,
  'Prior to this step, you have already taken 3 step(s). Below are the most recent 3 observations and actions:',
  ...ENTRIES,
  'You are now at step 4 and your current observation is: You clean the mug 1 using the sink 1.',
  "Now it's your turn to take an action.",
].join('\n')
const SKILL = 'Clean the mug at the sink before going to the coffeemachine.'

const ok = (r: FitResult) => {
  assert.ok(r.ok, r.ok ? '' : `${r.code}: ${r.reason}`)
  return r
}

describe('history layout', () => {
  it("finds verl-agent's history entries, multi-line observations included, and renders back exactly", () => {
    const layout = splitHistory(PROMPT)
    assert.deepEqual(layout.entries, ENTRIES)
    assert.equal(renderLayout(layout), PROMPT)
    assert.ok(layout.head.startsWith(TASK_LINE))
    assert.ok(layout.tail.includes("Now it's your turn"))
  })

  it('drops the oldest entries first', () => {
    const text = renderLayout(splitHistory(PROMPT), 2)
    assert.ok(!text.includes(ENTRIES[0]!) && !text.includes(ENTRIES[1]!) && text.includes(ENTRIES[2]!))
  })

  it("finds Search-R1's step entries", () => {
    const search =
      'Your question: who wrote Hamlet?\nHistory:\nStep 1:<search> hamlet author </search> \n<information>Doc 1: ' +
      'Hamlet is a play.\n</information>\nStep 2:<search> shakespeare </search> \n<information>Doc 1: …</information>\n' +
      "Now it's your turn to respond."
    const layout = splitHistory(search, HISTORY_ENTRY.searchStep)
    assert.equal(layout.entries.length, 2)
    assert.ok(layout.entries[0]!.startsWith('Step 1:<search> hamlet'))
    assert.equal(renderLayout(layout), search)
  })

  it('a prompt without history is all head', () => {
    const layout = splitHistory('Your task is to: x')
    assert.deepEqual(layout.entries, [])
    assert.equal(renderLayout(layout, 5), 'Your task is to: x')
  })
})

describe('fitting a step prompt', () => {
  const full = insertSkill(PROMPT, SKILL)

  it('changes nothing when the prompt with the skill fits', () => {
    const r = ok(
      fitStepPrompt(PROMPT, { countTokens: words, maxPromptTokens: words(full), block: episodeSkillBlock(SKILL) }),
    )
    assert.equal(r.prompt, full)
    assert.equal(r.dropped, 0)
    assert.equal(r.blockDropped, false)
    assert.equal(r.tokens, words(full))
  })

  it('cuts the oldest history first, keeping the task line, the skill block and the rest', () => {
    const budget = words(full) - 1
    const r = ok(
      fitStepPrompt(PROMPT, { countTokens: words, maxPromptTokens: budget, block: episodeSkillBlock(SKILL) }),
    )
    assert.equal(r.dropped, 1)
    assert.ok(r.tokens <= budget)
    assert.ok(r.prompt.includes(TASK_LINE) && r.prompt.includes(`[${SKILL}]`))
    assert.ok(!r.prompt.includes(ENTRIES[0]!) && r.prompt.includes(ENTRIES[1]!) && r.prompt.includes(ENTRIES[2]!))
    assert.ok(r.prompt.includes("Now it's your turn to take an action."))
  })

  it('drops a skill that cannot fit whole, rather than cutting it, and counts that', () => {
    const withoutHistory = insertSkill(renderLayout(splitHistory(PROMPT), 3), SKILL)
    const budget = words(withoutHistory) - 1 // the skill cannot fit even without any history
    const r = ok(
      fitStepPrompt(PROMPT, { countTokens: words, maxPromptTokens: budget, block: episodeSkillBlock(SKILL) }),
    )
    assert.equal(r.blockDropped, true)
    assert.ok(!r.prompt.includes('Episode-Level Skill'))
    assert.ok(r.prompt.includes(TASK_LINE))
    // without the skill, the fewest entries are dropped
    const expectedDrops = [0, 1, 2, 3].find((k) => words(renderLayout(splitHistory(PROMPT), k)) <= budget)
    assert.equal(r.dropped, expectedDrops)
  })

  it('fails, with the numbers, when the protected parts alone exceed the budget', () => {
    const protectedTokens = words(renderLayout(splitHistory(PROMPT), 3))
    const r = fitStepPrompt(PROMPT, { countTokens: words, maxPromptTokens: protectedTokens - 1 })
    assert.equal(r.ok, false)
    if (!r.ok) {
      assert.equal(r.code, 'protected-too-long')
      assert.equal(
        r.reason,
        `the prompt without history needs ${protectedTokens} tokens, the budget is ${protectedTokens - 1}`,
      )
    }
  })

  it('reserves the response: the prompt budget is the context minus the response, never cutting it', () => {
    assert.equal(promptBudget({ countTokens: words, maxPromptTokens: 100, responseTokens: 30, contextLength: 120 }), 90)
    assert.equal(promptBudget({ countTokens: words, maxPromptTokens: 80, responseTokens: 30, contextLength: 120 }), 80)
    const plain = words(PROMPT)
    const r = ok(
      fitStepPrompt(PROMPT, {
        countTokens: words,
        maxPromptTokens: 1000,
        responseTokens: 10,
        contextLength: plain + 9,
      }),
    )
    assert.equal(r.dropped, 1)
    const tooLong = fitStepPrompt(PROMPT, {
      countTokens: words,
      maxPromptTokens: 1000,
      responseTokens: 50,
      contextLength: 40,
    })
    assert.ok(!tooLong.ok && tooLong.code === 'response-too-long' && tooLong.reason.includes('50 of 40'))
  })

  it('rejects a nonsensical budget', () => {
    assert.throws(
      () => promptBudget({ countTokens: words, maxPromptTokens: -1 }),
      (e: unknown) =>
        e instanceof SeedInputError && e.message.includes('maxPromptTokens must be an integer ≥ 0, got -1'),
    )
  })
})

describe('fitting the analyzer prompt', () => {
  const episode: AnalyzerEpisode = {
    task: 'put a clean mug in coffeemachine 1',
    outcome: 'success',
    steps: [0, 1, 2, 3].map((k) => ({
      observation: `observation ${k} `.repeat(5),
      response: `response ${k}`,
      valid: true,
    })),
  }

  it('keeps the whole trajectory when it fits', () => {
    const r = ok(fitAnalyzerPrompt(episode, { countTokens: words, maxPromptTokens: 10_000 }))
    assert.equal(r.prompt, analyzerPrompt(episode))
    assert.equal(r.dropped, 0)
  })

  it('leaves out the oldest steps first, keeping the task line and the last step, and reserves the answer', () => {
    const budget = words(analyzerPrompt(episode, { firstStep: 2 }))
    const r = ok(
      fitAnalyzerPrompt(episode, {
        countTokens: words,
        maxPromptTokens: 10_000,
        responseTokens: 100,
        contextLength: budget + 100,
      }),
    )
    assert.equal(r.dropped, 2)
    assert.ok(r.prompt.includes('- Task description: put a clean mug in coffeemachine 1'))
    assert.ok(r.prompt.includes('Step 3\n') && r.prompt.includes('Step 2\n') && !r.prompt.includes('Step 1\n'))
  })

  it('fails when even the last step alone does not fit', () => {
    const lastOnly = words(analyzerPrompt(episode, { firstStep: 3 }))
    const r = fitAnalyzerPrompt(episode, { countTokens: words, maxPromptTokens: lastOnly - 1 })
    assert.ok(!r.ok && r.code === 'protected-too-long' && r.reason.includes(`needs ${lastOnly} tokens`))
  })
})

describe('truncation counts', () => {
  it('tallies truncated, skill-dropped and failed prompts', () => {
    const results: FitResult[] = [
      { ok: true, prompt: 'a', tokens: 1, dropped: 0, blockDropped: false, tokensCut: 0 },
      { ok: true, prompt: 'b', tokens: 1, dropped: 2, blockDropped: false, tokensCut: 0 },
      { ok: true, prompt: 'c', tokens: 1, dropped: 3, blockDropped: true, tokensCut: 0 },
      { ok: false, code: 'protected-too-long', reason: 'r', tokens: 9, budget: 5 },
    ]
    assert.deepEqual(tallyFits(results), {
      prompts: 4,
      truncated: 2,
      blockDropped: 1,
      failed: 1,
      failures: { 'response-too-long': 0, 'protected-too-long': 1 },
    })
  })

  it('counts a left-truncated prompt as truncated, never as a dropped block', () => {
    const cut = ok(
      fitStepPrompt(PROMPT, {
        countTokens: words,
        maxPromptTokens: 10,
        block: episodeSkillBlock(SKILL),
        truncation: 'left',
      }),
    )
    const fits = ok(fitStepPrompt(PROMPT, { countTokens: words, maxPromptTokens: 10_000, truncation: 'left' }))
    const tally = tallyFits([cut, fits])
    assert.equal(tally.prompts, 2)
    assert.equal(tally.truncated, 1)
    assert.equal(tally.blockDropped, 0)
  })
})

describe("left truncation (prompt.truncation: 'left')", () => {
  const full = insertSkill(PROMPT, SKILL)
  const left = { countTokens: words, truncation: 'left' } as const

  it('a prompt that fits is the same fit under both policies', () => {
    for (const block of [undefined, episodeSkillBlock(SKILL)]) {
      const budget = { countTokens: words, maxPromptTokens: words(full), ...(block ? { block } : {}) }
      const dropOldest = ok(fitStepPrompt(PROMPT, budget))
      assert.deepEqual(ok(fitStepPrompt(PROMPT, { ...budget, truncation: 'left' })), dropOldest)
      assert.equal(dropOldest.tokensCut, 0)
    }
    const episode: AnalyzerEpisode = {
      task: 'x',
      outcome: 'failure',
      steps: [{ observation: 'o', response: 'r', valid: true }],
    }
    assert.deepEqual(
      ok(fitAnalyzerPrompt(episode, { ...left, maxPromptTokens: 10_000 })),
      ok(fitAnalyzerPrompt(episode, { countTokens: words, maxPromptTokens: 10_000 })),
    )
  })

  it('keeps the whole rendering, skill and all history included, and cuts its leftmost tokens to the budget', () => {
    const budget = words(full) - 5
    const r = ok(fitStepPrompt(PROMPT, { ...left, maxPromptTokens: budget, block: episodeSkillBlock(SKILL) }))
    assert.equal(r.prompt, full)
    assert.equal(r.tokens, budget)
    assert.equal(r.tokensCut, 5)
    assert.equal(r.dropped, 0)
    assert.equal(r.blockDropped, false)
    // drop-oldest at the same budget would have dropped history instead
    const dropOldest = ok(
      fitStepPrompt(PROMPT, { countTokens: words, maxPromptTokens: budget, block: episodeSkillBlock(SKILL) }),
    )
    assert.ok(dropOldest.dropped > 0 && dropOldest.tokensCut === 0)
  })

  it('never fails for protected parts: a budget under the protected parts still keeps the last tokens', () => {
    const protectedTokens = words(renderLayout(splitHistory(PROMPT), 3))
    const r = ok(fitStepPrompt(PROMPT, { ...left, maxPromptTokens: protectedTokens - 1 }))
    assert.equal(r.prompt, PROMPT)
    assert.equal(r.tokensCut, words(PROMPT) - (protectedTokens - 1))
  })

  it('still reserves the response, and fails when no prompt token fits', () => {
    const r = ok(fitStepPrompt(PROMPT, { ...left, maxPromptTokens: 1000, responseTokens: 10, contextLength: 30 }))
    assert.equal(r.tokens, 20)
    const none = fitStepPrompt(PROMPT, { ...left, maxPromptTokens: 1000, responseTokens: 30, contextLength: 30 })
    assert.ok(!none.ok && none.code === 'protected-too-long' && none.reason.includes('keeps none'))
    const tooLong = fitStepPrompt(PROMPT, { ...left, maxPromptTokens: 1000, responseTokens: 50, contextLength: 40 })
    assert.ok(!tooLong.ok && tooLong.code === 'response-too-long')
  })

  it('cuts the whole analyzer prompt (every step kept in the text) rather than leaving out steps', () => {
    const episode: AnalyzerEpisode = {
      task: 'put a clean mug in coffeemachine 1',
      outcome: 'success',
      steps: [0, 1, 2, 3].map((k) => ({ observation: `observation ${k} `.repeat(5), response: `r ${k}`, valid: true })),
    }
    const whole = analyzerPrompt(episode)
    const r = ok(fitAnalyzerPrompt(episode, { ...left, maxPromptTokens: 20 }))
    assert.equal(r.prompt, whole)
    assert.equal(r.dropped, 0)
    assert.equal(r.tokens, 20)
    assert.equal(r.tokensCut, words(whole) - 20)
    // where drop-oldest fails (the last step alone is over the budget), left truncation fits
    assert.equal(fitAnalyzerPrompt(episode, { countTokens: words, maxPromptTokens: 20 }).ok, false)
  })
})
