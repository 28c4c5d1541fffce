// Server processes started by seedflow: spawned with logs in a file and a PID file beside it, stopped by
// PID only, and found again (or reaped) through their PID files by a later command.
import { spawn } from 'node:child_process'
import { closeSync, openSync } from 'node:fs'
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

export interface ProcessSpec {
  /** Short name; the PID file is `<stateDir>/<name>.pid.json` and the log `<stateDir>/<name>.log`. */
  name: string
  command: string
  args: string[]
  env?: NodeJS.ProcessEnv
  stateDir: string
  /**
   * true: the process outlives this one (its own session, no owner): the embedded default's servers.
   * false: owned by this process; a later reap kills it if this process has died (a killed test run).
   */
  detached: boolean
  /** Endpoints and the like, kept in the PID file so a later command can reuse the server. */
  info?: Record<string, unknown>
}

export interface PidRecord {
  pid: number
  name: string
  command: string
  args: string[]
  ownerPid: number | null
  startedAt: string
  info: Record<string, unknown>
}

export interface RunningProcess {
  record: PidRecord
  pidFile: string
  logFile: string
  /** Resolves when the process exits (for owned processes only; detached ones are polled). */
  exited: Promise<number | null>
  stop(): Promise<void>
}

export async function startProcess(spec: ProcessSpec): Promise<RunningProcess> {
  await mkdir(spec.stateDir, { recursive: true })
  const logFile = logFileOf(spec.stateDir, spec.name)
  const pidFile = pidFileOf(spec.stateDir, spec.name)
  const log = openSync(logFile, 'a')
  let child: ReturnType<typeof spawn>
  try {
    child = spawn(spec.command, spec.args, {
      env: spec.env ?? process.env,
      stdio: ['ignore', log, log],
      detached: spec.detached,
    })
  } finally {
    closeSync(log)
  }
  const spawned = new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve)
    child.once('error', (error) => reject(new Error(`cannot start ${spec.name} (${spec.command}): ${error.message}`)))
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  await spawned
  if (spec.detached) child.unref()
  const record: PidRecord = {
    pid: child.pid as number,
    name: spec.name,
    command: spec.command,
    args: spec.args,
    ownerPid: spec.detached ? null : process.pid,
    startedAt: new Date().toISOString(),
    info: spec.info ?? {},
  }
  await writeFile(pidFile, `${JSON.stringify(record, null, 2)}\n`)
  return { record, pidFile, logFile, exited, stop: () => stopRecorded(record, pidFile) }
}

export function pidFileOf(stateDir: string, name: string): string {
  return join(stateDir, `${name}.pid.json`)
}

export function logFileOf(stateDir: string, name: string): string {
  return join(stateDir, `${name}.log`)
}

export async function readPidFile(path: string): Promise<PidRecord | undefined> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as PidRecord
  } catch {
    return undefined
  }
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as { code?: string }).code === 'EPERM'
  }
}

/** True when `pid` is alive and still runs the recorded command (PIDs get reused). */
export async function isRunning(record: PidRecord): Promise<boolean> {
  if (!isAlive(record.pid)) return false
  try {
    const argv0 = (await readFile(`/proc/${record.pid}/cmdline`, 'utf8')).split('\0')[0]
    return argv0 === record.command
  } catch {
    return process.platform !== 'linux' // no /proc: trust liveness
  }
}

/** SIGTERM, then SIGKILL after `graceMs`; removes the PID file. Never signals a PID that runs something else. */
export async function stopRecorded(record: PidRecord, pidFile: string, graceMs = 10_000): Promise<void> {
  if (await isRunning(record)) {
    signal(record.pid, 'SIGTERM')
    const deadline = Date.now() + graceMs
    while (isAlive(record.pid) && Date.now() < deadline) await sleep(50)
    if (isAlive(record.pid)) {
      signal(record.pid, 'SIGKILL')
      while (isAlive(record.pid)) await sleep(20)
    }
  }
  await rm(pidFile, { force: true })
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name)
  } catch (error) {
    if ((error as { code?: string }).code !== 'ESRCH') throw error
  }
}

/**
 * Cleans the PID files under `stateDir`: removes those whose process is gone, and stops (by PID) owned
 * processes whose owner has died, e.g. servers of a test run that was killed with SIGKILL.
 * Returns what it stopped.
 */
export async function reapStale(stateDir: string): Promise<PidRecord[]> {
  let names: string[]
  try {
    names = await readdir(stateDir)
  } catch {
    return []
  }
  const stopped: PidRecord[] = []
  for (const name of names.filter((n) => n.endsWith('.pid.json'))) {
    const path = join(stateDir, name)
    const record = await readPidFile(path)
    if (!record || !(await isRunning(record))) {
      await rm(path, { force: true })
    } else if (record.ownerPid !== null && !isAlive(record.ownerPid)) {
      await stopRecorded(record, path)
      stopped.push(record)
    }
  }
  return stopped
}

/** Last lines of a log, for error messages. */
export async function logTail(path: string, lines = 15): Promise<string> {
  try {
    return (await readFile(path, 'utf8')).trimEnd().split('\n').slice(-lines).join('\n')
  } catch {
    return '(no log)'
  }
}

/**
 * Polls `check` until it returns true. Fails early if the process exits, and after `timeoutMs` with an
 * error that names what was awaited, the log file and its last lines.
 */
export async function waitUntilReady(
  proc: Pick<RunningProcess, 'record' | 'logFile'>,
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check().catch(() => false)) return
    if (!isAlive(proc.record.pid)) {
      throw new Error(`${what} exited before it was ready; log ${proc.logFile}:\n${await logTail(proc.logFile)}`)
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${what} not ready after ${timeoutMs / 1000} s; log ${proc.logFile}:\n${await logTail(proc.logFile)}`,
      )
    }
    await sleep(100)
  }
}

/** Stops the process recorded in `<stateDir>/<name>.pid.json`, if it still runs; returns its record. */
export async function stopByPidFile(stateDir: string, name: string): Promise<PidRecord | undefined> {
  const pidFile = pidFileOf(stateDir, name)
  const record = await readPidFile(pidFile)
  if (!record) return undefined
  const running = await isRunning(record)
  await stopRecorded(record, pidFile)
  return running ? record : undefined
}
