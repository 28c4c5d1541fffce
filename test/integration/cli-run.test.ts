// `seedflow run <config>` as a user runs it, against the test's Temporal server (TEMPORAL_ADDRESS) with a
// folder store: a micro seedRun shows its progress and ends with the table of held-out success (and `seedflow
// report` of it works); Ctrl-C stops the worker (a running warm-start too, between its steps); a bad file is
// rejected with every bad field before anything starts.
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Client, Connection } from '@temporalio/client'
import { seedflow } from '../cli/seedflow-process.ts'
import { microConfig } from '../compute/micro.ts'
import { testServers } from './servers.ts'

describe('seedflow run (CLI, real dev server, folder store)', () => {
  let dir: string
  let env: NodeJS.ProcessEnv
  let connection: Connection | undefined
  const client = () => new Client({ connection: connection as Connection })

  before(async () => {
    connection = await Connection.connect({ address: testServers().temporalAddress })
    dir = mkdtempSync(join(tmpdir(), 'seedflow-cli-run-'))
    env = {
      TEMPORAL_ADDRESS: testServers().temporalAddress,
      SEEDFLOW_ARTIFACTS_DIR: join(dir, 'artifacts'),
      SEEDFLOW_S3_BUCKET: '',
    }
  })

  after(async () => {
    rmSync(dir, { recursive: true, force: true })
    await connection?.close()
  })

  it('runs a micro seedRun with progress lines and prints warm-start, Stage-1 and final success', async () => {
    const c = microConfig('seed')
    const file = join(dir, 'micro.json')
    writeFileSync(file, JSON.stringify({ ...c, stage2: { ...c.stage2, iterations: 2 } }))
    const runId = `cli-run-${process.pid}`
    const r = await seedflow(['run', file, '--run-id', runId], env)
    assert.equal(r.code, 0, `exit ${r.code}\n${r.out}\n${r.err}`)
    assert.match(r.out, /starting workflow seedRun/)
    assert.match(r.out, /evaluation base: \d+\.\d% ± \d+\.\d% \(4 tasks\)/)
    // progress lines come from a 1 s poll, which a micro run can outpace: the evaluations are always shown
    assert.match(r.out, /\[\d+:\d\d\] evaluation stage 1: /)
    const table = r.out.slice(r.out.indexOf(`held-out success of run ${runId}:`))
    assert.ok(table.length > 0, r.out)
    for (const label of ['warm-start', 'stage 1', 'iteration 1 \\(final\\)'])
      assert.match(table, new RegExp(`\\n  ${label} +\\d+\\.\\d% ± \\d+\\.\\d% \\(4 tasks\\)`))
    assert.match(r.out, new RegExp(`artifacts: .*/runs/${runId}/`))
    assert.match(r.out, new RegExp(`npx seedflow report ${runId} --open`))
    // and the report it points at: Temporal's state of the run, a skill page per iteration
    const report = await seedflow(['report', runId, '--out', join(dir, 'report')], env)
    assert.equal(report.code, 0, `exit ${report.code}\n${report.out}\n${report.err}`)
    assert.match(report.out, new RegExp(`report of ${runId} in .*/report/index\\.html \\(2 skill pages\\)`))
    assert.match(readFileSync(join(dir, 'report', 'index.html'), 'utf8'), /completed · finished \(2 of 2 iterations/)
    const unknown = await seedflow(['report', 'no-such-run', '--out', join(dir, 'nothing')], env)
    assert.equal(unknown.code, 1)
    assert.match(unknown.err, /unknown run no-such-run: no runs\/no-such-run\/run\.json in /)
    // the table follows the workflow's close at once (no status query left waiting for a worker that has gone)
    const closed = (await client().workflow.getHandle(runId).describe()).closeTime
    const tableLine = r.lines.find((l) => l.text.startsWith(`held-out success of run ${runId}:`))
    assert.ok(closed && tableLine)
    const lag = (tableLine.at - closed.getTime()) / 1000
    assert.ok(lag < 2, `the table came ${lag.toFixed(1)} s after the workflow closed`)
  })

  it('on Ctrl-C stops its worker and says the run goes on, exit 130', async () => {
    const c = microConfig('seed')
    const file = join(dir, 'long.json')
    writeFileSync(file, JSON.stringify({ ...c, stage2: { ...c.stage2, iterations: 50 } }))
    const runId = `cli-interrupt-${process.pid}`
    let sent = false
    const r = await seedflow(['run', file, '--run-id', runId], env, (line, signal) => {
      // the first Stage 2 progress line, whichever iteration: the 1 s progress poll can outpace iteration 0
      if (!sent && /iteration \d+ \(\d+ of 50\)/.test(line)) {
        sent = true
        signal('SIGINT')
      }
    })
    assert.ok(sent, r.out)
    assert.equal(r.code, 130, `${r.out}\n${r.err}`)
    assert.match(r.err, new RegExp(`interrupted \\(SIGINT\\): run ${runId} goes on at .*seedflow abort ${runId}`))
    const handle = client().workflow.getHandle(runId)
    assert.equal((await handle.describe()).status.name, 'RUNNING')
    await handle.terminate('test over')
  })

  it('on Ctrl-C in a long warm-start stops the phase between steps, not after it', async () => {
    const c = microConfig('seed')
    const file = join(dir, 'long-warmstart.json')
    // a warm-start of a million steps: hours; the worker must not wait for it to shut down
    writeFileSync(file, JSON.stringify({ ...c, warmstart: { ...c.warmstart, steps: 1_000_000, evalEvery: 0 } }))
    const runId = `cli-interrupt-warmstart-${process.pid}`
    let sentAt = 0
    let killed = false
    let timer: NodeJS.Timeout | undefined
    const r = await seedflow(['run', file, '--run-id', runId], env, (line, signal) => {
      if (sentAt === 0 && /prepare: warmstart step \d+\/1000000/.test(line)) {
        sentAt = Date.now()
        signal('SIGINT')
        // bounded: a worker that waits for the phase would hold the test for hours
        timer = setTimeout(() => {
          killed = true
          signal('SIGKILL')
        }, 60_000)
      }
    })
    clearTimeout(timer)
    const seconds = (Date.now() - sentAt) / 1000
    assert.ok(sentAt > 0, r.out)
    assert.ok(!killed, `still running 60 s after Ctrl-C (the warm-start went on)\n${r.out}\n${r.err}`)
    assert.equal(r.code, 130, `${r.out}\n${r.err}`)
    assert.ok(seconds < 20, `exited ${seconds.toFixed(1)} s after Ctrl-C`)
    assert.match(r.err, new RegExp(`interrupted \\(SIGINT\\): run ${runId} goes on`))
    await client().workflow.getHandle(runId).terminate('test over')
  })

  it('rejects an invalid file with every bad field path, before starting anything', async () => {
    const c = microConfig('seed')
    const file = join(dir, 'bad.json')
    writeFileSync(file, JSON.stringify({ ...c, stage2: { ...c.stage2, groupSize: 0, lr: -1 }, env: 'chess' }))
    const r = await seedflow(['run', file, '--run-id', `cli-bad-${process.pid}`], env)
    assert.equal(r.code, 1)
    for (const path of ['stage2.groupSize', 'stage2.lr', 'env'])
      assert.match(r.err, new RegExp(path.replace('.', '\\.')))
    assert.doesNotMatch(r.out, /starting workflow/)
  })
})
