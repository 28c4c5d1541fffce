// The CPU household preset: it parses, and its prompts, responses, analyzer answers and Stage 2 iteration fit
// the budgets it sets (with a tokenizer built the way the warm-start builds it, from fewer demonstrations).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { fitPrompt, promptCodec } from '../../compute/index.ts'
import { fitAnalyzer } from '../../compute/prompts.ts'
import { demonstrations, demoResponse } from '../../compute/warmstart.ts'
import { getEnv } from '../../envs/index.ts'
import { trainByteLevelBpe } from '../../policy/bpe-trainer.ts'
import { TextTokenizer, TINY_SPECIAL_TOKENS } from '../../policy/tokenizer.ts'
import { ENV_STEP_CAPS } from '../../seed/config.ts'
import { CPU_PRESETS, cpuHouseholdPreset, cpuPreset } from '../../seed/presets/cpu.ts'

/** Step samples one Stage 2 iteration may produce at most (about sokoban's token volume). */
const MAX_ITERATION_SAMPLES = 1500

describe('CPU household preset', () => {
  const c = cpuHouseholdPreset('grpo')

  it('is the registered CPU preset of household, for any row', () => {
    assert.equal(CPU_PRESETS.household, cpuHouseholdPreset)
    assert.equal(cpuPreset('household').algorithm, 'seed')
    assert.equal(c.algorithm, 'grpo')
    assert.equal(c.env, 'household')
    assert.equal(c.model.kind, 'builtin')
    assert.ok(c.warmstart && c.warmstart.targetSuccess < 0.5 && c.warmstart.evalEvery > 0)
    assert.equal(c.evaluation.maxEnvSteps, ENV_STEP_CAPS.household)
  })

  it('sizes one Stage 2 iteration to its budget, and leaves the searching expert room within the step caps', () => {
    const s2 = c.stage2
    assert.ok(s2.tasksPerStep * s2.groupSize * s2.maxEnvSteps <= MAX_ITERATION_SAMPLES)
    assert.ok(s2.miniBatchSize <= (s2.tasksPerStep * s2.groupSize * s2.maxEnvSteps) / 2)
    const env = getEnv('household')
    const cap = Math.min(s2.maxEnvSteps, c.stage1.maxEnvSteps)
    let solved = 0
    for (let seed = 0; seed < 120; seed++) {
      const episode = env.reset(env.task('validation', seed))
      while (!episode.done && episode.stepCount < cap) episode.step(env.formatResponse(episode.expertAction()))
      if (episode.trajectory().info.won) solved++
    }
    assert.ok(solved >= 0.95 * 120, `the expert solves ${solved} of 120 validation tasks within ${cap} steps`)
  })

  it('fits demonstrated prompts (with their skill block), responses and oracle answers into its budgets', async () => {
    assert.ok(c.warmstart && c.model.kind === 'builtin')
    const ws = { ...c.warmstart, demoTasks: 150 }
    const demos = await demonstrations('household', ws, c.prompt, c.seed)
    const json = trainByteLevelBpe(demos.corpus, {
      vocabSize: c.model.vocabSize,
      specialTokens: [...TINY_SPECIAL_TOKENS],
    })
    const codec = promptCodec(new TextTokenizer(json), 'builtin')
    const positions = c.model.maxPositions
    const step = {
      maxPromptTokens: c.prompt.maxPromptTokens,
      responseTokens: c.prompt.maxResponseTokens,
      contextLength: positions,
    }
    let droppedHistory = 0
    for (const d of demos.plain) droppedHistory += fitPrompt(codec, d.prompt, step).dropped
    assert.equal(droppedHistory, 0, 'every plain prompt keeps its history window')
    assert.ok(demos.skilled.length > 0)
    for (const d of demos.skilled) assert.equal(fitPrompt(codec, d.prompt, step, d.block).blockDropped, false)
    const env = getEnv('household')
    for (const response of new Set(demos.plain.map((d) => demoResponse(env, d))))
      assert.ok(codec.responseIds(response).length <= c.prompt.maxResponseTokens, response)
    const analyzer = {
      maxPromptTokens: c.stage2.analyzer.maxPromptTokens,
      responseTokens: c.stage2.analyzer.maxAnswerTokens,
      contextLength: positions,
    }
    for (const a of demos.analyses) {
      fitAnalyzer(codec, a.episode, analyzer)
      assert.ok(codec.responseIds(a.answer).length <= c.stage2.analyzer.maxAnswerTokens, a.answer)
    }
  })
})
