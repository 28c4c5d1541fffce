// `seedflow worker` processes as an operator starts them, against the test's Temporal and S3 servers: each with
// its own counters file and log, killed only by its PID.
import { type ChildProcess, spawn } from 'node:child_process'
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { LOCAL_S3_CREDENTIALS, LOCAL_S3_REGION } from '../../infra/s3-server.ts'
import { PROJECT_ROOT } from '../../infra/tools.ts'
import type { CountersLine } from '../../workers/counters-file.ts'
import { testServers } from './servers.ts'

export interface WorkerProcess {
  name: string
  proc: ChildProcess
  exited: Promise<void>
  counters: string
  log: string
}

export interface WorkerSpec {
  /** Folder of the counters file and the log. */
  dir: string
  name: string
  /** S3 prefix of the run's artifacts. */
  prefix: string
  /** `seedflow worker` arguments after `worker` (role and options); --counters-file is added. */
  args: string[]
  /** Extra environment (SEEDFLOW_FAULT, another S3 endpoint, ...). */
  env?: NodeJS.ProcessEnv
}

export function startWorker(spec: WorkerSpec): WorkerProcess {
  const { temporalAddress, s3Endpoint, s3Bucket } = testServers()
  const counters = join(spec.dir, `${spec.name}.counters.jsonl`)
  const log = join(spec.dir, `${spec.name}.log`)
  const out = openSync(log, 'w')
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TEMPORAL_ADDRESS: temporalAddress,
    SEEDFLOW_S3_BUCKET: s3Bucket,
    SEEDFLOW_S3_ENDPOINT: s3Endpoint,
    SEEDFLOW_S3_PREFIX: spec.prefix,
    AWS_ACCESS_KEY_ID: LOCAL_S3_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: LOCAL_S3_CREDENTIALS.secretAccessKey,
    AWS_REGION: LOCAL_S3_REGION,
    SEEDFLOW_HOME: join(spec.dir, 'home'),
    SEEDFLOW_ORT_THREADS: '1', // deterministic, and light on a 2-core machine
    ...spec.env,
  }
  const args = [join(PROJECT_ROOT, 'cli', 'bin.js'), 'worker', ...spec.args, '--counters-file', counters]
  const proc = spawn(process.execPath, args, { cwd: PROJECT_ROOT, env, stdio: ['ignore', out, out] })
  closeSync(out)
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()))
  return { name: spec.name, proc, exited, counters, log }
}

export function alive(w: WorkerProcess): boolean {
  return w.proc.exitCode === null && w.proc.signalCode === null
}

/** `signal` to the worker's process (by its PID), then wait for it to be gone. */
export async function stopWorker(w: WorkerProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (!alive(w) || w.proc.pid === undefined) return
  process.kill(w.proc.pid, signal)
  await w.exited
}

export function countersOf(w: WorkerProcess): CountersLine[] {
  if (!existsSync(w.counters)) return []
  return readFileSync(w.counters, 'utf8')
    .split('\n')
    .filter((l) => l.trim().length > 0)
    .map((l) => JSON.parse(l) as CountersLine)
}

export function tail(w: WorkerProcess, lines = 15): string {
  return existsSync(w.log) ? readFileSync(w.log, 'utf8').split('\n').slice(-lines).join('\n') : '(no log)'
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
