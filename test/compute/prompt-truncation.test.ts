// `prompt.truncation: 'left'` (docs/algorithm.md §13) through a real chat template codec (the Qwen2 fixture's
// ChatML): a prompt over its budget keeps exactly the last ids of its full templated tokenization, a prompt that
// fits is the same under both policies, and the analyzer records carry the cut into Stage 1's SFT pairs.
import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import {
  annotateWithOracle,
  chatTemplateCodec,
  fitPrompt,
  type Policy,
  type PromptCodec,
  type RolloutTrajectory,
} from '../../compute/index.ts'
import { fitAnalyzer } from '../../compute/prompts.ts'
import { skillPairs } from '../../compute/sft.ts'
import { getEnv } from '../../envs/index.ts'
import type { Episode } from '../../envs/types.ts'
import { importHuggingFaceFolder } from '../../policy/hf-import.ts'
import type { PromptSettings } from '../../seed/config.ts'
import {
  type AnalyzerEpisode,
  analyzerPrompt,
  EPISODE_SKILL_TITLE,
  episodeOutcome,
  episodeSkillBlock,
  insertBlock,
  type PromptTruncation,
} from '../../seed/index.ts'
import { QWEN2_FIXTURE } from './micro.ts'

const TASK_LINE = 'You are an expert agent operating in the ALFRED Embodied Environment. Your task is to:'
const SKILL = 'Find the mug first, clean it at the sink, then go to the coffeemachine.'
const SETTINGS: PromptSettings = {
  compact: false,
  compactGrids: false,
  historyWindow: 3,
  maxPromptTokens: 100_000,
  maxResponseTokens: 16,
  truncation: 'drop-oldest',
}
const budget = (maxPromptTokens: number, truncation: PromptTruncation) => ({
  maxPromptTokens,
  responseTokens: 16,
  contextLength: 1_000_000,
  truncation,
})

let codec: PromptCodec
let episode: Episode
/** The step prompt after three expert steps (three history entries), and its rendering with the skill. */
let text: string
let withSkill: string

before(async () => {
  const { tokenizer, chatTemplate } = await importHuggingFaceFolder(QWEN2_FIXTURE)
  assert.ok(chatTemplate)
  codec = chatTemplateCodec(tokenizer, chatTemplate)
  const env = getEnv('household')
  episode = env.reset(env.task('train', 3))
  for (let k = 0; k < 3 && !episode.done; k++) episode.step(env.formatResponse(episode.expertAction(), ''))
  text = episode.prompt()
  withSkill = insertBlock(text, episodeSkillBlock(SKILL))
})

describe('left truncation of step prompts', () => {
  it('keeps exactly the last N ids of the full templated prompt; the task line and the skill at its left are gone', () => {
    assert.match(text, /\[Observation 3:/)
    const full = codec.promptIds(withSkill)
    const n = full.length - 300 // past the task line and the skill, short of the protected parts
    const fit = fitPrompt(codec, text, budget(n, 'left'), episodeSkillBlock(SKILL))
    assert.deepEqual(fit.ids, full.slice(full.length - n))
    assert.equal(fit.ids.length, n)
    assert.equal(fit.tokens, n)
    assert.equal(fit.tokensCut, 300)
    assert.equal(fit.prompt, withSkill) // the text is the whole rendering; only the ids are cut
    assert.equal(fit.dropped, 0)
    assert.equal(fit.blockDropped, false)
    const seen = codec.decode(fit.ids)
    assert.ok(!seen.includes(TASK_LINE) && !seen.includes(EPISODE_SKILL_TITLE) && !seen.includes(SKILL), seen)
    assert.ok(seen.includes('[Observation 1:') && seen.includes("it's your turn"), seen)
    // drop-oldest at the same budget keeps the task line and the skill, and drops history instead
    const dropOldest = fitPrompt(codec, text, budget(n, 'drop-oldest'), episodeSkillBlock(SKILL))
    assert.ok(dropOldest.ids.length <= n && dropOldest.tokensCut === 0 && dropOldest.dropped > 0)
    const kept = codec.decode(dropOldest.ids)
    assert.ok(kept.includes(TASK_LINE) && kept.includes(SKILL), kept)
  })

  it('a prompt that fits is unchanged under both policies: identical ids, the full templated prompt', () => {
    for (const block of [undefined, episodeSkillBlock(SKILL)]) {
      const full = codec.promptIds(block ? withSkill : text)
      const left = fitPrompt(codec, text, budget(full.length, 'left'), block)
      const dropOldest = fitPrompt(codec, text, budget(full.length, 'drop-oldest'), block)
      assert.deepEqual(left.ids, full)
      assert.deepEqual(left, dropOldest)
      assert.equal(left.tokensCut, 0)
    }
  })
})

describe('left truncation of analyzer prompts', () => {
  const trajectory = (): RolloutTrajectory => {
    const t = episode.trajectory()
    return {
      id: 0,
      group: 0,
      sample: 0,
      task: episode.task,
      steps: [],
      trajectory: t,
      won: t.info.won,
      score: t.info.score,
      totalReward: t.totalReward,
    }
  }
  const analyzerEpisodeOf = (t: RolloutTrajectory): AnalyzerEpisode => ({
    task: t.trajectory.taskText,
    outcome: episodeOutcome(t.totalReward),
    steps: t.trajectory.steps.map((s) => ({ observation: s.observation, response: s.response, valid: s.valid })),
  })

  it('keeps the last N ids of the whole analyzer prompt, every step in its text', () => {
    const a = analyzerEpisodeOf(trajectory())
    const full = codec.promptIds(analyzerPrompt(a))
    const n = Math.floor(full.length / 2)
    const fit = fitAnalyzer(codec, a, budget(n, 'left'))
    assert.deepEqual(fit.ids, full.slice(full.length - n))
    assert.equal(fit.prompt, analyzerPrompt(a))
    assert.ok(!codec.decode(fit.ids).includes('- Task description:'))
  })

  it('Stage 1 records keep the full prompt and the cut; the SFT pair is what the policy saw; the count counts', async () => {
    const t = trajectory()
    const whole = codec.promptIds(analyzerPrompt(analyzerEpisodeOf(t)))
    const n = whole.length - 40
    const input = (truncation: PromptTruncation) => ({
      trajectories: [t],
      prompt: { ...SETTINGS, truncation },
      maxPromptTokens: n,
      maxAnswerTokens: 16,
      batchSize: 4,
    })
    const left = await annotateWithOracle('household', codec, 1_000_000, input('left'))
    const record = left.skills[0]!
    assert.equal(left.stats.truncated, 1)
    assert.equal(record.prompt, analyzerPrompt(analyzerEpisodeOf(t)))
    assert.equal(record.promptTokensCut, 40)
    assert.equal(record.stepsDropped, 0)
    const pairs = skillPairs({ codec } as Policy, left.skills)
    assert.deepEqual(pairs[0]!.context, whole.slice(40))
    // drop-oldest: steps left out, no cut written (its records are as before)
    const dropOldest = await annotateWithOracle('household', codec, 1_000_000, input('drop-oldest'))
    assert.equal(dropOldest.stats.truncated, 1)
    assert.ok(dropOldest.skills[0]!.stepsDropped > 0)
    assert.ok(!('promptTokensCut' in dropOldest.skills[0]!))
    assert.deepEqual(
      skillPairs({ codec } as Policy, dropOldest.skills)[0]!.context,
      codec.promptIds(dropOldest.skills[0]!.prompt),
    )
  })
})
