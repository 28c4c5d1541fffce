// The `seedflow` binary as a user runs it: a child process with its exit code, stdout and stderr, its pid, and
// when each stdout line arrived (Date.now()).
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const BIN = fileURLToPath(new URL('../../cli/bin.js', import.meta.url))

export interface SeedflowResult {
  code: number | null
  out: string
  err: string
  pid: number | undefined
  /** Each complete stdout line with the time it was read. */
  lines: { at: number; text: string }[]
  /** When the process exited (Date.now()). */
  exitedAt: number
  /** True when `killAfterMs` ran out and the process was SIGKILLed. */
  killed: boolean
}

export interface SeedflowOptions {
  /** SIGKILL the process after this long (a test's bound on a command that might never exit). */
  killAfterMs?: number
  /** The working folder of the command (default: the test's), where a user's relative paths resolve. */
  cwd?: string
}

/**
 * `onLine`: called with each stdout line as it comes, and a way to signal the process (Ctrl-C tests).
 * `input`: written to stdin, which is then closed (a pipe, as when a script drives the command).
 */
export function seedflow(
  args: string[],
  env: NodeJS.ProcessEnv,
  onLine?: (text: string, signal: (name: NodeJS.Signals) => void) => void,
  input?: string,
  options: SeedflowOptions = {},
): Promise<SeedflowResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env },
      ...(options.cwd ? { cwd: options.cwd } : {}),
    })
    let killed = false
    const bound =
      options.killAfterMs === undefined
        ? undefined
        : setTimeout(() => {
            killed = true
            child.kill('SIGKILL')
          }, options.killAfterMs)
    if (input !== undefined) child.stdin.end(input)
    let out = ''
    let err = ''
    let partial = ''
    const lines: SeedflowResult['lines'] = []
    child.stdout.on('data', (d) => {
      out += d
      const at = Date.now()
      const parts = (partial + d).split('\n')
      partial = parts.pop() ?? ''
      for (const text of parts) {
        lines.push({ at, text })
        onLine?.(text, (name) => child.kill(name))
      }
    })
    child.stderr.on('data', (d) => {
      err += d
    })
    child.on('error', reject)
    let exitedAt = 0
    child.on('exit', () => {
      exitedAt = Date.now()
      clearTimeout(bound)
    })
    child.on('close', (code) => resolve({ code, out, err, pid: child.pid, lines, exitedAt, killed }))
  })
}
