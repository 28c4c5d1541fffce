import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import {
  isAlive,
  type PidRecord,
  pidFileOf,
  reapStale,
  startProcess,
  stopByPidFile,
  waitUntilReady,
} from '../../infra/processes.ts'

const SLEEPER = ['-e', 'setInterval(() => {}, 1000)']

/** A PID that is certainly not running: a child that has already exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '0'])
  await new Promise((resolve) => child.once('exit', resolve))
  return child.pid as number
}

describe('server processes', () => {
  let dir: string
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'seedflow-proc-'))
  })
  after(async () => rm(dir, { recursive: true, force: true }))

  it('starts a process with a PID file and a log, and stops it by PID', async () => {
    const proc = await startProcess({
      name: 'echo',
      command: process.execPath,
      args: ['-e', 'console.log("hello from the server"); setInterval(() => {}, 1000)'],
      stateDir: dir,
      detached: false,
    })
    const record = JSON.parse(await readFile(proc.pidFile, 'utf8')) as PidRecord
    assert.equal(record.pid, proc.record.pid)
    assert.equal(record.ownerPid, process.pid)
    await waitUntilReady(
      proc,
      'echo server',
      async () => (await readFile(proc.logFile, 'utf8')).includes('hello'),
      5000,
    )
    await proc.stop()
    assert.equal(isAlive(proc.record.pid), false)
    await assert.rejects(readFile(proc.pidFile), { code: 'ENOENT' })
  })

  it('reaps an owned process whose owner died (a killed test run) and keeps detached ones', async () => {
    const orphan = await startProcess({
      name: 'orphan',
      command: process.execPath,
      args: SLEEPER,
      stateDir: dir,
      detached: false,
    })
    const kept = await startProcess({
      name: 'kept',
      command: process.execPath,
      args: SLEEPER,
      stateDir: dir,
      detached: true,
    })
    try {
      const record = { ...orphan.record, ownerPid: await deadPid() }
      await writeFile(orphan.pidFile, JSON.stringify(record))
      const reaped = await reapStale(dir)
      assert.deepEqual(
        reaped.map((r) => r.name),
        ['orphan'],
      )
      assert.equal(isAlive(orphan.record.pid), false)
      assert.equal(isAlive(kept.record.pid), true)
    } finally {
      await orphan.stop()
      await kept.stop()
    }
  })

  it('removes a stale PID file whose process is gone, without signalling anything', async () => {
    const pidFile = pidFileOf(dir, 'gone')
    const record: PidRecord = {
      pid: await deadPid(),
      name: 'gone',
      command: process.execPath,
      args: [],
      ownerPid: null,
      startedAt: new Date().toISOString(),
      info: {},
    }
    await writeFile(pidFile, JSON.stringify(record))
    assert.deepEqual(await reapStale(dir), [])
    await assert.rejects(readFile(pidFile), { code: 'ENOENT' })
  })

  it('never signals a PID that now runs another program', async () => {
    const stranger = spawn(process.execPath, SLEEPER)
    try {
      const record: PidRecord = {
        pid: stranger.pid as number,
        name: 'reused',
        command: '/nonexistent/temporal',
        args: [],
        ownerPid: null,
        startedAt: new Date().toISOString(),
        info: {},
      }
      await writeFile(pidFileOf(dir, 'reused'), JSON.stringify(record))
      assert.equal(await stopByPidFile(dir, 'reused'), undefined)
      assert.equal(isAlive(stranger.pid as number), true)
    } finally {
      stranger.kill()
    }
  })

  it('names the log and shows its tail when a server exits before it is ready', async () => {
    const proc = await startProcess({
      name: 'crasher',
      command: process.execPath,
      args: ['-e', 'console.error("bind: address already in use"); process.exit(3)'],
      stateDir: dir,
      detached: false,
    })
    await assert.rejects(
      waitUntilReady(proc, 'crasher at 127.0.0.1:1', async () => false, 5000),
      /crasher at 127\.0\.0\.1:1 exited before it was ready; log .*crasher\.log:\nbind: address already in use/,
    )
  })

  it('times out with a clear error naming what it waited for', async () => {
    const proc = await startProcess({
      name: 'slow',
      command: process.execPath,
      args: SLEEPER,
      stateDir: dir,
      detached: false,
    })
    try {
      await assert.rejects(
        waitUntilReady(proc, 'slow server at 127.0.0.1:2', async () => false, 300),
        /slow server at 127\.0\.0\.1:2 not ready after 0\.3 s/,
      )
    } finally {
      await proc.stop()
    }
  })
})
