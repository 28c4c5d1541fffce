// Contrastive skill reading (warmstart.skillDetours) and the premise check (compute/skill-gap.ts), issue 46.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { skillGap } from '../../compute/skill-gap.ts'
import { demonstrations } from '../../compute/warmstart.ts'
import { createLocalEngine, type Engine } from '../../engine/index.ts'
import { ENVS } from '../../envs/index.ts'
import { sokobanMoves, sokobanSkill } from '../../envs/sokoban/index.ts'
import { microCheckpoint, microConfig, microPolicy } from './micro.ts'

const config = microConfig()
const ws = { ...config.warmstart!, demoTasks: 40, skillDemoShare: 0.5 }
const moves = (block: string) => /here the moves were ([a-z, ]+)\./.exec(block)?.[1]?.split(', ') ?? []

describe('warmstart.skillDetours: skill-reading demonstrations whose skill, not the state, says the move', () => {
  it('plays each skill task twice from one first state, labels every step with the move its own skill lists', async () => {
    const d = await demonstrations(config.env, { ...ws, skillDetours: 0.4 }, config.prompt, 7)
    assert.ok(d.skilled.length > 0)
    // episodes: runs of demos with the same block; each run's labels are that block's list of moves
    const episodes: Array<{ block: string; prompts: string[]; labels: string[] }> = []
    for (const demo of d.skilled) {
      const last = episodes.at(-1)
      if (last && last.block === demo.block && last.labels.length < moves(last.block).length) {
        last.labels.push(demo.action)
        last.prompts.push(demo.prompt)
      } else episodes.push({ block: demo.block ?? '', prompts: [demo.prompt], labels: [demo.action] })
    }
    for (const e of episodes) assert.deepEqual(e.labels, moves(e.block), 'the labels are the skill its prompt carries')
    // the same first state under two skills that start differently: what only reading the skill can fit
    const firstMoves = new Map<string, Set<string>>()
    for (const e of episodes) {
      const set = firstMoves.get(e.prompts[0]!) ?? new Set()
      set.add(e.labels[0]!)
      firstMoves.set(e.prompts[0]!, set)
    }
    assert.ok(
      [...firstMoves.values()].some((s) => s.size > 1),
      'some first state is demonstrated with two different first moves (the expert makes one: a detour)',
    )
  })

  it('absent and 0 are the same demonstrations as before the switch', async () => {
    const before = await demonstrations(config.env, ws, config.prompt, 7)
    const zero = await demonstrations(config.env, { ...ws, skillDetours: 0, skillBlind: 0 }, config.prompt, 7)
    assert.deepEqual(zero, before)
    for (const demo of before.skilled) assert.ok(demo.block?.includes('here the moves were'))
  })

  it('skillBlind adds skill steps shown without their observation, labelled with the move the skill lists', async () => {
    const settings = { ...ws, skillDetours: 0.4 }
    const seen = await demonstrations(config.env, settings, config.prompt, 7)
    const d = await demonstrations(config.env, { ...settings, skillBlind: 0.5 }, config.prompt, 7)
    const isBlind = (prompt: string) => !/[#√]/.test(prompt)
    assert.ok(
      seen.skilled.every((x) => !isBlind(x.prompt)),
      'every seen prompt shows its room',
    )
    // the same episodes with some steps repeated blind: removing them gives the demonstrations without the switch
    const blind = d.skilled.filter((x) => isBlind(x.prompt))
    assert.ok(blind.length > 0.3 * seen.skilled.length && blind.length < 0.7 * seen.skilled.length, `${blind.length}`)
    assert.deepEqual(
      d.skilled.filter((x) => !isBlind(x.prompt)),
      seen.skilled,
    )
    assert.deepEqual(d.plain, seen.plain)
    // each blind step follows its seen step, with its label: the move at that step of the skill
    d.skilled.forEach((x, i) => {
      if (!isBlind(x.prompt)) return
      const step = Number(/Step (\d+)/.exec(x.prompt)?.[1])
      assert.equal(x.action, d.skilled[i - 1]?.action)
      assert.equal(x.action, moves(x.block ?? '')[step - 1], 'the label is the skill’s move at the prompt’s step')
      assert.ok(!x.prompt.includes('Last:') && !x.prompt.includes('last action'), 'no history either')
    })
  })
})

describe('the premise check: the expert’s responses under its own skill, another task’s and none', () => {
  let engine: Engine
  before(() => {
    engine = createLocalEngine({ threads: 1 })
  })
  after(async () => {
    await engine.close()
  })

  it('pairs each won task with another one, and its figures are the differences of its log-probs', async () => {
    const policy = microPolicy(engine, await microCheckpoint(engine))
    try {
      const r = await skillGap(policy, {
        env: 'sokoban',
        split: 'validation',
        seedStart: 0,
        tasks: 6,
        prompt: config.prompt,
        thoughts: false,
      })
      assert.equal(r.tasks, 6)
      assert.ok(r.won >= 2 && r.won <= 6)
      assert.equal(r.blockDropped, 0)
      const close = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-9, `${a} vs ${b}`)
      close(r.gaps.ownVsOther.perStep, r.logprob.own - r.logprob.other)
      close(r.gaps.ownVsNone.perStep, r.logprob.own - r.logprob.none)
      assert.notEqual(r.logprob.own, r.logprob.other, 'another task’s skill is another text')
      // a won sokoban episode's rule is the same workflow sentence for every task: its own-vs-other gap is 0
      assert.equal(r.gaps.ruleOwnVsOther?.perStep, 0)
      assert.equal(r.gaps.ownVsOther.tasks, r.won)
    } finally {
      await policy.trainer.release()
    }
  })
})

describe('sokobanSkill: the oracle skill of a won episode, plain or with numbered moves', () => {
  it('is the oracle’s own skill when plain, and numbers every move from 1 when numbered', () => {
    const env = ENVS.sokoban
    const episode = env.reset(env.task('validation', 3))
    while (!episode.done) episode.step(env.formatResponse(episode.expertAction(), episode.expertThought()))
    const t = episode.trajectory()
    const actions = sokobanMoves(t)
    assert.ok(t.info.won && actions.length >= 4)
    assert.equal(env.oracle(t).output.episode_skill, sokobanSkill(actions))
    const numbered = sokobanSkill(actions, true)
    const listed = /here the moves were (.*)\.$/.exec(numbered)?.[1]?.split(', ') ?? []
    assert.deepEqual(
      listed,
      actions.map((a, i) => `${i + 1} ${a}`),
    )
    assert.equal(
      numbered.replace(/ here the moves were .*$/, ''),
      sokobanSkill(actions).replace(/ here the moves were .*$/, ''),
    )
  })
})
