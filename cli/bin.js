#!/usr/bin/env node
// Runs the TypeScript CLI directly (no build step): tsx compiles on the fly.
import module from 'node:module'

if (typeof module.register === 'function') {
  const { register } = await import('tsx/esm/api')
  register()
  await import('./main.ts')
} else {
  // Node < 20.6 has no module.register: rerun under tsx's loader flag.
  const { spawnSync } = await import('node:child_process')
  const main = new URL('./main.ts', import.meta.url).pathname
  const result = spawnSync(process.execPath, ['--loader', 'tsx', main, ...process.argv.slice(2)], { stdio: 'inherit' })
  process.exit(result.status ?? 1)
}
