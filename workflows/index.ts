export { registerRun } from './register-run.ts'
