#!/usr/bin/env node
// Runs the TypeScript CLI directly (no build step): tsx compiles on the fly.
import module from 'node:module'

if (typeof module.register === 'function') {
  const { register } = await import('tsx/esm/api')
  register()
  // `--execution-provider cuda`: run again with the CUDA provider's libraries on the loader's path (cuda-exec.ts)
  const { runWithCudaLibraries } = await import('./cuda-exec.ts')
  const status = await runWithCudaLibraries()
  if (status === undefined) await import('./main.ts')
  else process.exitCode = status
} else {
  // Node < 20.6 has no module.register: rerun under tsx's loader flag.
  const { spawnSync } = await import('node:child_process')
  const main = new URL('./main.ts', import.meta.url).pathname
  const result = spawnSync(process.execPath, ['--loader', 'tsx', main, ...process.argv.slice(2)], { stdio: 'inherit' })
  process.exit(result.status ?? 1)
}
