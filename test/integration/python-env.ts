// A Python environment server as a user runs it (examples/text-game/server.py by default): the python of a fresh
// venv (standard library only, nothing installed), on a 127.0.0.1 port, stopped by its PID. It can be killed
// (SIGKILL, as a crash) and started again on the same port, for fault tests.
import assert from 'node:assert/strict'
import { type ChildProcessByStdio, spawn, spawnSync } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { freePort } from '../../infra/ports.ts'

export const TEXT_GAME = fileURLToPath(new URL('../../examples/text-game/server.py', import.meta.url))

export interface PythonEnv {
  /** http://127.0.0.1:<port> */
  url: string
  port: number
  /** Kills the server outright (SIGKILL) and waits for it to be gone: its episodes are lost. */
  kill(): Promise<void>
  /** Starts it again on the same port. */
  restart(): Promise<void>
  /** Stops it (if running) and removes the venv. */
  stop(): Promise<void>
}

type Child = ChildProcessByStdio<null, Readable, Readable>

/** Starts `script --port P --host 127.0.0.1` from a fresh venv; resolves once it prints its listening line. */
export async function startPythonEnv(script = TEXT_GAME): Promise<PythonEnv> {
  const dir = await mkdtemp(join(tmpdir(), 'seedflow-python-env-'))
  const venv = join(dir, 'venv')
  // no pip: the example needs nothing beyond the standard library
  const made = spawnSync('python3', ['-m', 'venv', '--without-pip', venv], { encoding: 'utf8' })
  assert.equal(made.status, 0, `python3 -m venv failed: ${made.error?.message ?? made.stderr}`)
  const port = await freePort()
  let child: Child | undefined
  const start = async () => {
    const proc = spawn(join(venv, 'bin', 'python'), [script, '--port', String(port), '--host', '127.0.0.1'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    child = proc
    let log = ''
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${script} did not listen in 30 s:\n${log}`)), 30_000)
      proc.stdout.on('data', (d: Buffer) => {
        log += d
        const found = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/m.exec(log)?.[1]
        if (found) {
          clearTimeout(timer)
          resolve(found)
        }
      })
      proc.stderr.on('data', (d: Buffer) => {
        log += d
      })
      proc.once('exit', (code) => {
        clearTimeout(timer)
        reject(new Error(`${script} exited (${code}) before listening:\n${log}`))
      })
    })
    assert.equal(url, `http://127.0.0.1:${port}`)
  }
  const kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
    const proc = child
    if (proc?.pid === undefined || proc.exitCode !== null || proc.signalCode !== null) return
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()))
    process.kill(proc.pid, signal)
    const timer = setTimeout(() => proc.pid !== undefined && process.kill(proc.pid, 'SIGKILL'), 5000)
    await exited
    clearTimeout(timer)
  }
  await start()
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    kill: () => kill('SIGKILL'),
    restart: start,
    async stop() {
      await kill('SIGTERM')
      await rm(dir, { recursive: true, force: true })
    },
  }
}
