// The headless browser of the report tests (infra/install-chromium.sh: Debian's chromium package), ensured by
// the test command like the other binaries it needs.
import { ensuredByScript } from './tools.ts'

/** The path of a Chromium binary, installing Debian's package first when there is none (as root). */
export function ensureChromium(env: NodeJS.ProcessEnv = process.env): string {
  return ensuredByScript('install-chromium.sh', 'Chromium for the browser tests', env)
}
