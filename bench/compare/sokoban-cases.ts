// Writes rooms, action sequences and our step results as JSON, for sokoban_gym.py to replay in gym-sokoban.
//   node --import tsx bench/compare/sokoban-cases.ts > /tmp/sokoban-cases.json
import { mulberry32, pick } from '../../envs/rng.ts'
import { ACTIONS, generateSokoban, SOKOBAN_SPEC } from '../../envs/sokoban/index.ts'
import { DIM, TARGET, WALL } from '../../envs/sokoban/room.ts'

const CASES = Number(process.argv[2] ?? 300)
const rng = mulberry32(7)
const cases = []
for (let seed = 0; seed < CASES; seed++) {
  const task = generateSokoban({ split: 'train', seed })
  const grid = (box: number, player: number) =>
    [...Array(DIM).keys()].map((r) =>
      [...Array(DIM).keys()].map((c) => {
        const i = r * DIM + c
        if (i === player) return 5
        if (i === box) return task.room.structure[i] === TARGET ? 3 : 4
        return task.room.structure[i] === WALL ? 0 : task.room.structure[i] === TARGET ? 2 : 1
      }),
    )
  const fixed = [...Array(DIM).keys()].map((r) =>
    [...Array(DIM).keys()].map((c) =>
      task.room.structure[r * DIM + c] === WALL ? 0 : task.room.structure[r * DIM + c] === TARGET ? 2 : 1,
    ),
  )
  // Half the cases replay the optimal solution, half a random walk with some no-ops.
  const words: string[] =
    seed % 2 === 0
      ? task.optimal.map((d) => ACTIONS[d] as string)
      : Array.from({ length: 15 }, () => pick(rng, [...ACTIONS, ...ACTIONS, 'still']))
  const state = { box: task.room.box, player: task.room.player }
  const initial = grid(state.box, state.player)
  const steps = []
  for (const w of words) {
    const t = SOKOBAN_SPEC.transition(task, state, w)
    steps.push({
      action: w === 'still' ? 0 : ACTIONS.indexOf(w as (typeof ACTIONS)[number]) + 1,
      reward: t.reward,
      done: t.done,
      state: grid(state.box, state.player),
    })
    if (t.done) break
  }
  cases.push({ seed, fixed, initial, steps })
}
process.stdout.write(JSON.stringify(cases))
