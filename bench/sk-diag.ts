import { oracleAnswer } from '../activities/core/analyze.ts'
import { getEnv } from '../envs/index.ts'
import { mulberry32 } from '../envs/rng.ts'
import { episodeSkillBlock } from '../seed/index.ts'
const env = getEnv('sokoban')
const rng = mulberry32(3)
for (const i of [1, 2]) {
  const ep = env.reset(env.task('train', i))
  while (!ep.done) ep.step(env.formatResponse(rng.next() < 0.3 ? ep.randomAction(rng) : ep.expertAction()))
  const t = ep.trajectory()
  const o = env.oracle(t).output
  console.log(t.info.won, oracleAnswer(o))
  console.log(episodeSkillBlock(o.episode_skill))
}
