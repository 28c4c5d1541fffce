// The upper-bound row `seed-oracle` (issue 20): its teacher reads the oracle skill of the expert's own solution of
// each group's task, a privileged skill the policy's analyzer could not write.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { blockAt, expertSkill, iterationPlan, teacherBlocks, teacherSource } from '../../compute/plan.ts'
import { getEnv } from '../../envs/index.ts'
import { ALGORITHMS } from '../../seed/algorithms.ts'
import { episodeSkillBlock } from '../../seed/index.ts'
import { planTrajectories } from './micro.ts'

const trajectories = planTrajectories

describe('seed-oracle: the privileged teacher', () => {
  it('reads no analysis: no analyze phase, the teacher block comes from the oracle', () => {
    const row = ALGORITHMS['seed-oracle']
    assert.equal(teacherSource(row), 'oracle')
    assert.ok(!(row.phases as readonly string[]).includes('analyze'))
    assert.equal(row.start, 'stage1-sft')
    assert.equal(row.loss.opd, true)
  })

  it("gives every trajectory of a group the oracle skill of the expert's solution of the group's task", async () => {
    const plan = iterationPlan(
      { seed: 3, env: 'sokoban', algorithm: 'seed-oracle', stage2: { tasksPerStep: 4, groupSize: 3 } },
      2,
    )
    const blocks = await teacherBlocks(plan, ALGORITHMS['seed-oracle'], trajectories(4, 3), {})
    assert.ok(blocks)
    for (const [group, task] of plan.tasks.entries()) {
      const skill = await expertSkill('sokoban', task)
      assert.ok(skill, `the sokoban expert solves task ${task.seed}`)
      // the workflow names the expert's moves, which a failed trajectory's own text does not hold
      assert.match(skill, /^Workflow: .* here the moves were (up|down|left|right)(, (up|down|left|right))*\.$/)
      for (let k = 0; k < 3; k++) assert.equal(blocks[group * 3 + k], episodeSkillBlock(skill))
    }
    assert.notEqual(blocks[0], blocks[3], 'different tasks, different skills')
  })

  it("replays the expert: the skill's moves solve the task", async () => {
    const env = getEnv('sokoban')
    const task = env.task('train', 5)
    const moves = /here the moves were (.*)\.$/.exec((await expertSkill('sokoban', task)) ?? '')?.[1]?.split(', ') ?? []
    const episode = env.reset(task)
    for (const move of moves) episode.step(env.formatResponse(move))
    assert.ok(episode.trajectory().info.won, `moves ${moves.join(', ')} solve the room`)
  })

  it('a task the expert does not solve gives its group no teacher (no OPD), as a failed demonstration gives no skill', async () => {
    // household train task 119: the expert's search runs out of steps (3 of the first 200 train tasks)
    const env = getEnv('household')
    assert.equal(await expertSkill('household', env.task('train', 119)), null)
    const plan = {
      ...iterationPlan(
        { seed: 1, env: 'household', algorithm: 'seed-oracle', stage2: { tasksPerStep: 2, groupSize: 2 } },
        0,
      ),
      tasks: [env.task('train', 119), env.task('train', 3)],
    }
    const blocks = await teacherBlocks(plan, ALGORITHMS['seed-oracle'], trajectories(2, 2), {})
    assert.deepEqual(blocks?.slice(0, 2), [null, null])
    assert.match(
      blockAt(blocks?.[2], 0) ?? '',
      /Workflow for "put a hot apple in garbagecan\.": .*take apple 1 from cabinet 4/,
    )
    assert.equal(blocks?.[2], blocks?.[3])
  })
})
