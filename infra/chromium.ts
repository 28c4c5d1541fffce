// The headless browser of the report tests (infra/install-chromium.sh: Debian's chromium package), ensured by
// the test command like the other binaries it needs.
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { PROJECT_ROOT } from './tools.ts'

/** The path of a Chromium binary, installing Debian's package first when there is none (as root). */
export function ensureChromium(env: NodeJS.ProcessEnv = process.env): string {
  const script = join(PROJECT_ROOT, 'infra', 'install-chromium.sh')
  const result = spawnSync('bash', [script], { stdio: ['ignore', 'pipe', 2], env, encoding: 'utf8' })
  const path = result.stdout.trim().split('\n').pop()
  if (result.status !== 0 || !path)
    throw new Error(`no Chromium for the browser tests (bash ${script}, exit ${result.status})`)
  return path
}
