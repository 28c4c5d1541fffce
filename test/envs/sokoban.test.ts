import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { verlAgentSeed } from '../../envs/core.ts'
import {
  ACTIONS,
  generateSokoban,
  MAX_SOLUTION_STEPS,
  MIN_SOLUTION_STEPS,
  parseSokoban,
  sokoban,
} from '../../envs/sokoban/index.ts'
import { DIM, solve, WALL } from '../../envs/sokoban/room.ts'

describe('sokoban', () => {
  it('keeps shortest solutions within 4-12 steps and a walled border', () => {
    for (let seed = 0; seed < 200; seed++) {
      const task = generateSokoban({ split: 'train', seed })
      assert.ok(task.optimal.length >= MIN_SOLUTION_STEPS && task.optimal.length <= MAX_SOLUTION_STEPS)
      for (let i = 0; i < DIM; i++) {
        for (const cell of [i, (DIM - 1) * DIM + i, i * DIM, i * DIM + DIM - 1])
          assert.equal(task.room.structure[cell], WALL)
      }
      assert.notEqual(task.room.box, task.target)
    }
  })

  it('maps splits into disjoint seed ranges with test-unseen equal to test-seen', () => {
    assert.equal(verlAgentSeed('train', 70_000), 70_000 % 2 ** 16)
    assert.ok(verlAgentSeed('validation', 5) >= 2 ** 16 && verlAgentSeed('validation', 5) < 2 ** 31)
    assert.ok(verlAgentSeed('test-seen', 5) >= 2 ** 31)
    assert.deepEqual(
      generateSokoban({ split: 'test-seen', seed: 9 }),
      generateSokoban({ split: 'test-unseen', seed: 9 }),
    )
    assert.notDeepEqual(generateSokoban({ split: 'train', seed: 9 }), generateSokoban({ split: 'test-seen', seed: 9 }))
  })

  it('pays -0.1 per step and 10.9 for the final push (step, +1 on target, +10 solved)', () => {
    const ref = sokoban.task('train', 3)
    const task = generateSokoban(ref)
    const ep = sokoban.reset(ref)
    const rewards = task.optimal.map(
      (d) => ep.step(sokoban.formatResponse(['up', 'down', 'left', 'right'][d] as string)).reward,
    )
    assert.deepEqual(
      rewards.slice(0, -1),
      rewards.slice(0, -1).map(() => -0.1),
    )
    assert.ok(Math.abs((rewards.at(-1) as number) - 10.9) < 1e-9)
    assert.equal(ep.done, true)
    assert.deepEqual(ep.info, { won: true, score: 1, family: 'sokoban' })
  })

  it('charges -1 for pushing the box off its target', () => {
    const OFFSET = [-DIM, DIM, -1, 1] as const
    for (let seed = 0; seed < 200; seed++) {
      const task = generateSokoban({ split: 'train', seed })
      const last = task.optimal.at(-1) as 0 | 1 | 2 | 3
      if (task.room.structure[task.target + OFFSET[last]] === WALL) continue
      // The solved state with the player behind the box: one more push in the same direction.
      const state = { box: task.target, player: task.target - OFFSET[last] }
      const t = sokoban.spec.transition(task, state, ACTIONS[last])
      assert.ok(Math.abs(t.reward - -1.1) < 1e-9, `reward ${t.reward}`)
      return
    }
    assert.fail('no room with a free cell beyond the target in 200 seeds')
  })

  it('treats a move into a wall as a step that changes nothing', () => {
    const ref = sokoban.task('train', 0)
    const task = generateSokoban(ref)
    const state = { box: task.room.box, player: task.room.player }
    for (const a of ['up', 'down', 'left', 'right']) {
      const copy = { ...state }
      const t = sokoban.spec.transition(task, copy, a)
      if (copy.player === state.player) assert.equal(t.reward, -0.1)
    }
  })

  it('turns unusable output into gym-sokoban action 0: no move, -0.1', () => {
    const ep = sokoban.reset(sokoban.task('train', 1))
    const before = ep.observation
    const r = ep.step('I will go up')
    assert.deepEqual([r.valid, r.reward, r.observation], [false, -0.1, before])
  })

  it('parses the first direction inside <action>', () => {
    assert.deepEqual(parseSokoban('<think>x</think><action> Left then up</action>'), { ok: true, action: 'left' })
    assert.deepEqual(parseSokoban('<action>still</action>'), { ok: true, action: 'still' })
    assert.equal(parseSokoban('<action>north</action>').ok, false)
  })

  it('solves by BFS with the same length as the generator recorded', () => {
    const task = generateSokoban({ split: 'validation', seed: 12 })
    assert.equal(solve(task.room.structure, task.room.box, task.room.player)?.length, task.optimal.length)
  })
})
