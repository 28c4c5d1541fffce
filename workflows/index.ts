export { registerRun } from './register-run.ts'
export { seedIteration } from './seed-iteration.ts'
export { seedRun } from './seed-run.ts'
