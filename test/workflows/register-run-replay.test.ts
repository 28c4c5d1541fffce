import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import { Worker } from '@temporalio/worker'
import { WORKFLOWS_PATH } from '../../workers/local.ts'
import { HISTORY_FIXTURE } from './history-fixtures.ts'

test('registerRun replays its committed history without nondeterminism', async () => {
  const history = JSON.parse(await readFile(HISTORY_FIXTURE, 'utf8'))
  assert.ok(history.events.length > 5, 'the fixture holds a whole history')
  await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, 'slice-run-1')
})
