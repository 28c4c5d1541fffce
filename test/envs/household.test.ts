import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { FAMILIES } from '../../envs/household/catalogue.ts'
import {
  HOUSEHOLD_MAX_STEPS,
  HOUSEHOLD_SPEC,
  household,
  householdPlan,
  NOTHING_HAPPENS,
  seeList,
} from '../../envs/household/index.ts'
import { generateHousehold, layoutSignature, unseenCombo } from '../../envs/household/world.ts'
import { mulberry32 } from '../../envs/rng.ts'
import { SPLITS, type Split } from '../../envs/types.ts'

const say = (a: string) => household.formatResponse(a, '')

function expertRun(split: Split, seed: number): { actions: string[]; observations: string[] } {
  const ep = household.reset(household.task(split, seed))
  const actions: string[] = []
  const observations: string[] = []
  while (!ep.done) {
    const a = ep.expertAction()
    actions.push(a)
    observations.push(ep.step(say(a)).observation)
  }
  return { actions, observations }
}

describe('household', () => {
  it('opens with the ALFRED welcome, the receptacle list and the task line', () => {
    const ep = household.reset(household.task('train', 0))
    assert.match(
      ep.observation,
      /^-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room\. Looking quickly around you, you see a .+, and a .+\.\n\nYour task is to: .+\.$/,
    )
  })

  it('phrases lists as ALFWorld does', () => {
    assert.equal(seeList([]), 'nothing.')
    assert.equal(seeList(['apple 1']), 'a apple 1.')
    assert.equal(seeList(['apple 1', 'mug 2', 'knife 1']), 'a apple 1, a mug 2, and a knife 1.')
  })

  it('answers a command that does nothing with "Nothing happens." and reward 0', () => {
    const ep = household.reset(household.task('train', 0))
    for (const cmd of ['take mug 1 from fridge 1', 'fly to the moon', 'open cabinet 99', 'inventory please']) {
      const r = ep.step(say(cmd))
      assert.deepEqual([r.observation, r.reward, r.valid], [NOTHING_HAPPENS, 0, true])
    }
  })

  it('uses ALFWorld feedback texts along an expert run', () => {
    const patterns = [
      /^You arrive at [a-z]+ \d+\. (On the [a-z]+ \d+, you see .+|The [a-z]+ \d+ is (closed\.|open\. In it, you see .+))$/,
      /^You open the [a-z]+ \d+\. The [a-z]+ \d+ is open\. In it, you see .+$/,
      /^You pick up the [a-z]+ \d+ from the [a-z]+ \d+\.$/,
      /^You move the [a-z]+ \d+ to the [a-z]+ \d+\.$/,
      /^You (heat|cool|clean) the [a-z]+ \d+ using the [a-z]+ \d+\.$/,
      /^You turn on the [a-z]+ \d+\.$/,
    ]
    for (let seed = 0; seed < 60; seed++) {
      for (const obs of expertRun('train', seed).observations) {
        assert.ok(
          patterns.some((p) => p.test(obs)),
          `unexpected feedback ${JSON.stringify(obs)}`,
        )
      }
    }
  })

  it('lists only admissible commands that change something or report', () => {
    const ep = household.reset(household.task('validation', 3))
    for (let i = 0; i < 6 && !ep.done; i++) {
      for (const cmd of ep.admissible() ?? []) {
        const probe = household.reset(household.task('validation', 3))
        for (const a of ep.trajectory().steps.map((s) => s.action as string)) probe.step(say(a))
        assert.notEqual(probe.step(say(cmd)).observation, NOTHING_HAPPENS, cmd)
      }
      ep.step(say(ep.expertAction()))
    }
  })

  it('pays 10 on the winning step only, and ends', () => {
    const ep = household.reset(household.task('train', 4))
    const rewards: number[] = []
    while (!ep.done) rewards.push(ep.step(say(ep.expertAction())).reward)
    assert.deepEqual(rewards, [...rewards.slice(0, -1).map(() => 0), 10])
    assert.equal(ep.info.won, true)
  })

  it('does not win a heat task by placing a cold object', () => {
    const seed = [...Array(60).keys()].find(
      (s) => generateHousehold({ split: 'train', seed: s }).family === 'pick_heat_then_place_in_recep',
    ) as number
    const ref = household.task('train', seed)
    const { actions } = expertRun('train', seed)
    const ep = household.reset(ref)
    for (const a of actions.filter((x) => !x.startsWith('heat ') && !x.includes('microwave')))
      if (!ep.done) ep.step(say(a))
    assert.equal(ep.info.won, false)
  })

  it('balances the six families and the goal never holds at reset', () => {
    const seen = new Set<string>()
    for (let seed = 0; seed < 60; seed++) {
      const ep = household.reset(household.task('train', seed))
      seen.add(ep.info.family)
      assert.equal(ep.step(say('look')).info.won, false)
    }
    assert.deepEqual([...seen].sort(), [...FAMILIES].sort())
  })

  it('keeps test-unseen layouts and goal combinations out of train', () => {
    const trainLayouts = new Set<string>()
    const trainCombos = new Set<string>()
    for (let seed = 0; seed < 600; seed++) {
      const t = generateHousehold({ split: 'train', seed })
      trainLayouts.add(layoutSignature(t.layout))
      trainCombos.add(`${t.family}|${t.object}|${t.target}`)
      assert.equal(unseenCombo(t.family, t.object, t.target), false)
    }
    for (let seed = 0; seed < 300; seed++) {
      const t = generateHousehold({ split: 'test-unseen', seed })
      assert.ok(!trainLayouts.has(layoutSignature(t.layout)), layoutSignature(t.layout))
      assert.ok(!trainCombos.has(`${t.family}|${t.object}|${t.target}`))
      assert.equal(unseenCombo(t.family, t.object, t.target), true)
    }
  })
  it('solves every task of every split within the step limit when the plan knows the whole state', () => {
    for (const split of SPLITS) {
      for (let seed = 0; seed < 200; seed++) {
        const data = household.generate({ split, seed })
        const { state } = HOUSEHOLD_SPEC.initial(data)
        let won = false
        for (let n = 0; n < HOUSEHOLD_MAX_STEPS && !won; n++)
          won = HOUSEHOLD_SPEC.transition(data, state, householdPlan(data, state, 'know')).won
        assert.ok(won, `${split} ${seed}`)
      }
    }
  })

  it('makes the expert (the searcher) choose from what the compact prompt shows', () => {
    // Same compact prompt, same expert action: a policy can imitate it. Only on the expert's own path; after a
    // random action the prompt may hide what the expert still knows (e.g. that the object was heated).
    const chosen = new Map<string, string>()
    let steps = 0
    for (let seed = 0; seed < 600; seed++) {
      const ep = household.reset(household.task('train', seed))
      while (!ep.done) {
        const prompt = ep.prompt({ compact: true })
        const action = ep.expertAction()
        assert.equal(chosen.get(prompt) ?? action, action, prompt)
        chosen.set(prompt, action)
        ep.step(say(action))
        steps++
      }
    }
    // prompts do repeat (same room and task, objects elsewhere), so the check is not vacuous
    assert.ok(chosen.size < steps, `${chosen.size} distinct prompts of ${steps}`)
  })
  it('gives the expert an answer in every state reached with random actions among its own', () => {
    // train seed 589 with 60% random actions leaves the object off its places while the searcher stands at its
    // only candidate (it used to throw there)
    for (const seed of [589, ...Array(300).keys()]) {
      const ep = household.reset(household.task('train', seed))
      const rng = mulberry32(seed)
      while (!ep.done) {
        const action = ep.expertAction()
        assert.equal(typeof action, 'string')
        ep.step(say(rng.next() < 0.6 ? ep.randomAction(rng) : action))
      }
    }
  })

  it('thinks the sub-goal its next action serves, naming the object the action decides on', () => {
    const seen = new Set<string>()
    for (let seed = 0; seed < 120; seed++) {
      const ep = household.reset(household.task('train', seed))
      while (!ep.done) {
        const action = ep.expertAction()
        const thought = ep.expertThought()
        const [verb, object] = action.split(' ')
        seen.add(verb as string)
        if (verb === 'take') assert.equal(thought, `find ${object}`, action)
        if (verb === 'heat' || verb === 'cool' || verb === 'clean') assert.equal(thought, `${verb} ${object}`, action)
        if (verb === 'use') assert.equal(thought, `find ${object}`, action)
        if (verb === 'move') assert.match(thought, new RegExp(`^(put ${object} in \\w+|drop ${object})$`), action)
        assert.match(thought, /^(find|heat|cool|clean|put|drop) \w+/, action)
        ep.step(household.formatResponse(action, thought))
      }
      assert.ok(ep.trajectory().info.won || ep.stepCount >= HOUSEHOLD_MAX_STEPS, `train ${seed}`)
    }
    for (const verb of ['take', 'heat', 'cool', 'clean', 'use', 'move']) assert.ok(seen.has(verb), verb)
  })
})
