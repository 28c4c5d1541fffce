// `stage2.oraclePlan: step` (issue 46): the oracle teacher plans from each step's own state, the student's moves
// so far then the expert's solution from there, so its plan holds off the expert's path too.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { type Policy, type RolloutResult, rescore, rollout } from '../../compute/index.ts'
import {
  blockAt,
  controlBlocks,
  expertSkill,
  iterationPlan,
  stepSkills,
  type TeacherBlock,
  teacherBlocks,
} from '../../compute/plan.ts'
import type { RolloutTrajectory } from '../../compute/rollout.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { getEnv } from '../../envs/index.ts'
import type { TaskRef } from '../../envs/types.ts'
import { ALGORITHMS } from '../../seed/algorithms.ts'
import { runConfig } from '../../seed/config.ts'
import { episodeSkillBlock } from '../../seed/index.ts'
import { microCheckpoint, microConfig, microPolicy, microRolloutInput } from './micro.ts'

const env = getEnv('sokoban')
const MOVES = ['up', 'down', 'left', 'right']
const movesOf = (skill: string | null) => /here the moves were (.*)\.$/.exec(skill ?? '')?.[1]?.split(', ') ?? []
const respond = (moves: readonly string[]) => moves.map((m) => env.formatResponse(m))

/** Whether these moves, played from the task's first state, win it. */
function wins(task: TaskRef, moves: readonly string[]): boolean {
  const episode = env.reset(task)
  for (const move of moves) if (!episode.done) episode.step(env.formatResponse(move))
  return episode.trajectory().info.won
}

/** The first (task, step, move) of the train split where leaving the expert's path leaves a room it still solves. */
async function detour(): Promise<{ task: TaskRef; expert: string[]; at: number; move: string }> {
  for (let seed = 0; seed < 50; seed++) {
    const task = env.task('train', seed)
    const expert = movesOf(await expertSkill('sokoban', task))
    for (let at = 1; at < expert.length - 1; at++) {
      for (const move of MOVES) {
        if (move === expert[at]) continue
        if (await expertSkill('sokoban', task, respond([...expert.slice(0, at), move])))
          return { task, expert, at, move }
      }
    }
  }
  throw new Error('no detour found in 50 train tasks')
}

describe("the oracle's plan from each step's own state", () => {
  it("is the expert's plan while the student follows it, and after a detour starts with the student's moves", async () => {
    const { task, expert, at, move } = await detour()
    const played = [...expert.slice(0, at), move]
    const responses = [...respond(played), 'I am not sure.', env.formatResponse('up')]
    const skills = await stepSkills('sokoban', task, responses)
    assert.equal(skills.length, responses.length)
    for (let step = 0; step <= at; step++)
      assert.equal(skills[step], await expertSkill('sokoban', task), `step ${step} is still on the expert's path`)
    const after = movesOf(skills[at + 1] ?? null)
    assert.deepEqual(after.slice(0, at + 1), played, "the plan lists the student's moves first")
    assert.notDeepEqual(after, expert)
    assert.ok(wins(task, after), 'the replanned moves win the room from its first state')
    // the response that gave no move took a step and moved nothing: the plan lists only moves
    assert.deepEqual(movesOf(skills[at + 2] ?? null), after)
  })

  it('is null at a step from which the expert does not win', async () => {
    for (let seed = 0; seed < 50; seed++) {
      const task = env.task('train', seed)
      const expert = movesOf(await expertSkill('sokoban', task))
      for (let at = 0; at < expert.length; at++) {
        for (const move of MOVES) {
          const prefix = respond([...expert.slice(0, at), move])
          if (move === expert[at] || (await expertSkill('sokoban', task, prefix)) !== null) continue
          const skills = await stepSkills('sokoban', task, [...prefix, env.formatResponse('up')])
          assert.equal(skills[at + 1], null, `train ${seed}: no win after ${move} at step ${at}`)
          assert.ok(skills[0], 'the first state is solvable')
          return
        }
      }
    }
    assert.fail('no losing detour in 50 train tasks')
  })

  it('teacherBlocks gives each trajectory a block per step; the control takes another task’s first-step block', async () => {
    const config = runConfig({ ...microConfig('seed-oracle'), algorithm: 'seed-oracle' })
    const plan = iterationPlan(
      { seed: 3, env: 'sokoban', algorithm: 'seed-oracle', stage2: { tasksPerStep: 2, groupSize: 2 } },
      1,
    )
    const trajectories = await Promise.all(
      plan.tasks.flatMap((task, group) =>
        [0, 1].map(async (sample) => {
          const expert = movesOf(await expertSkill('sokoban', task))
          // sample 0 follows the expert for two steps, sample 1 starts with the opposite of its first move
          const moves = sample === 0 ? expert.slice(0, 2) : [MOVES[MOVES.indexOf(expert[0]!) ^ 1]!, expert[0]!]
          return {
            id: group * 2 + sample,
            group,
            sample,
            task,
            steps: respond(moves).map((responseText) => ({ responseText })),
          } as unknown as RolloutTrajectory
        }),
      ),
    )
    assert.equal(config.stage2.oraclePlan, undefined, 'absent by default: the plan from the first state')
    const start = await teacherBlocks(plan, ALGORITHMS['seed-oracle'], trajectories, {})
    const step = await teacherBlocks(plan, ALGORITHMS['seed-oracle'], trajectories, { oraclePlan: 'step' })
    assert.ok(start && step)
    for (const t of trajectories) {
      const perStep = step[t.id] as readonly (string | null)[]
      const expected = await stepSkills(
        'sokoban',
        t.task,
        t.steps.map((s) => s.responseText),
      )
      assert.deepEqual(
        perStep,
        expected.map((s) => (s === null ? null : episodeSkillBlock(s))),
      )
      // at the first step both plans are the expert's from the first state
      assert.equal(blockAt(step[t.id], 0), blockAt(start[t.id], 0))
      assert.equal(blockAt(start[t.id], 1), blockAt(start[t.id], 0), 'the start plan is one block for every step')
    }
    assert.equal(blockAt(step[0], 1), blockAt(step[0], 0), 'on the path the plan stays')
    assert.notEqual(blockAt(step[1], 1), blockAt(step[1], 0), 'off the path it is replanned')
    const control = controlBlocks(step as TeacherBlock[], trajectories)
    for (const t of trajectories) {
      const other = trajectories.find((o) => o.group !== t.group && control[t.id] === blockAt(step[o.id], 0))
      assert.ok(other, `trajectory ${t.id}'s control is another task's first-step block`)
    }
  })
})

describe('rescore with a block per step', () => {
  const engine = createLocalEngine({ threads: 1 })
  after(() => engine.close())
  const config = microConfig()
  let policy: Policy
  let rolled: RolloutResult
  before(async () => {
    policy = microPolicy(engine, await microCheckpoint(engine, config))
    rolled = await rollout(policy, microRolloutInput(config, 5))
  })

  it("puts each step's own block into its teacher prompt, and a null step gets no teacher signal", async () => {
    const blocks = rolled.trajectories.map((t) =>
      t.steps.map((_, step) => (step === 1 ? null : episodeSkillBlock(`Plan ${t.id}.${step}: push the box down.`))),
    )
    const r = await rescore(policy, null, {
      trajectories: rolled.trajectories,
      teacherBlocks: blocks,
      budget: {
        maxPromptTokens: config.prompt.maxPromptTokens,
        responseTokens: config.prompt.maxResponseTokens,
        contextLength: config.model.maxPositions,
      },
      temperature: 1,
      batchSize: 4,
    })
    assert.ok(r.samples.some((s) => s.step === 1))
    for (const s of r.samples) {
      if (s.step === 1) {
        assert.equal(s.teacher, null)
        continue
      }
      assert.ok(s.teacher && s.teacherPromptIds)
      assert.match(policy.codec.decode(s.teacherPromptIds), new RegExp(`Plan ${s.trajectory}\\.${s.step}:`))
    }
  })
})
