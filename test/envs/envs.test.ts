import { ENVS } from '../../envs/index.ts'
import { type ConformanceOptions, describeEnvConformance } from './envs.case.ts'

const OPTIONS: Record<keyof typeof ENVS, ConformanceOptions> = {
  sokoban: { expertSample: 25, expertMinRate: 1, randomSample: 200 },
  ezpoints: { expertSample: 25, expertMinRate: 1, randomSample: 200 },
  // household's expert searches (it sees what the agent sees) and misses ~1% within 30 steps; household.test
  // shows every task solvable with the full-knowledge plan
  household: { expertSample: 30, expertMinRate: 0.96, randomSample: 100 },
  shop: { expertSample: 20, expertMinRate: 0.99, randomSample: 100 },
  searchqa: { expertSample: 30, expertMinRate: 0.99, randomSample: 200 },
}

for (const [name, env] of Object.entries(ENVS)) describeEnvConformance(env, OPTIONS[name as keyof typeof ENVS])
