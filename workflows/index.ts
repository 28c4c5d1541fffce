export { seedIteration } from './seed-iteration.ts'
export { seedRun } from './seed-run.ts'
