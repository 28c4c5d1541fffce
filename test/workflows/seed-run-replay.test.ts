import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import { Worker } from '@temporalio/worker'
import { WORKFLOWS_PATH } from '../../workers/local.ts'
import { historyFixture } from './history-fixtures.ts'

test('seedRun (grpo row, one iteration with a child) replays its committed history', async () => {
  const history = JSON.parse(await readFile(historyFixture('seed-run-grpo'), 'utf8'))
  assert.ok(history.events.length > 20, 'the fixture holds a whole history')
  await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, 'grpo-row')
})

test('seedIteration (grpo row, ending in recordIteration) replays its committed history', async () => {
  const history = JSON.parse(await readFile(historyFixture('seed-iteration-grpo'), 'utf8'))
  assert.ok(history.events.length > 20, 'the fixture holds a whole history')
  await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, 'grpo-row/iter-0')
})

test('seedRun (skill-grpo row: annotate before the base evaluation, one iteration) replays its committed history', async () => {
  const history = JSON.parse(await readFile(historyFixture('seed-run-skill-grpo'), 'utf8'))
  assert.ok(history.events.length > 20, 'the fixture holds a whole history')
  await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, 'skill-grpo-row')
})

test('seedRun (a grpo run forked at Stage 1, evaluated on a second split at the end, before the evaluations were recorded once) replays its committed history', async () => {
  const history = JSON.parse(await readFile(historyFixture('seed-run-fork'), 'utf8'))
  assert.ok(history.events.length > 20, 'the fixture holds a whole history')
  await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, 'fork-row')
})

test('seedRun (the same fork, its evaluations recorded once every split is done: patched) replays its committed history', async () => {
  const history = JSON.parse(await readFile(historyFixture('seed-run-fork-once'), 'utf8'))
  assert.ok(history.events.length > 20, 'the fixture holds a whole history')
  await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, 'fork-row')
})

test('seedRun (a failed iteration awaiting an operator, paused, retried held at its boundary, resumed) replays its committed history', async () => {
  const history = JSON.parse(await readFile(historyFixture('seed-run-retry-paused'), 'utf8'))
  assert.ok(history.events.length > 20, 'the fixture holds a whole history')
  await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, 'flaky-row')
})

test('seedRun (a failed iteration awaiting an operator, then aborted) replays its committed history', async () => {
  const history = JSON.parse(await readFile(historyFixture('seed-run-abort-waiting'), 'utf8'))
  assert.ok(history.events.length > 20, 'the fixture holds a whole history')
  await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, 'diverging-row')
})

test('seedIteration (paused during rollout, a changed RunRef, resumed before analyze) replays its committed history', async () => {
  const history = JSON.parse(await readFile(historyFixture('seed-iteration-paused'), 'utf8'))
  assert.ok(history.events.length > 20, 'the fixture holds a whole history')
  await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, 'pause-8538/iter-0')
})

test('seedRun (model-affinity: train phases sent to the worker that keeps the policy, Stage 1 first) replays its committed history', async () => {
  const history = JSON.parse(await readFile(historyFixture('seed-run-affinity'), 'utf8'))
  assert.ok(history.events.length > 20, 'the fixture holds a whole history')
  await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, 'affinity-row')
})

test('seedIteration (model-affinity: snapshot, rescore and update on the resident queue) replays its committed history', async () => {
  const history = JSON.parse(await readFile(historyFixture('seed-iteration-affinity'), 'utf8'))
  assert.ok(history.events.length > 20, 'the fixture holds a whole history')
  await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, 'affinity-row/iter-1')
})

test('seedIteration (model-affinity: the resident worker gone, each phase timed out unstarted and ran on the train queue) replays its committed history', async () => {
  const history = JSON.parse(await readFile(historyFixture('seed-iteration-affinity-gone'), 'utf8'))
  assert.ok(history.events.length > 20, 'the fixture holds a whole history')
  await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, 'gone-row/iter-1')
})

test("seedIteration (forget-gone-resident: the snapshot's wait on the gone queue sends the rescore to the train queue at once) replays its committed history", async () => {
  const history = JSON.parse(await readFile(historyFixture('seed-iteration-forget-gone'), 'utf8'))
  assert.ok(history.events.length > 20, 'the fixture holds a whole history')
  const patches = history.events
    .flatMap((e: { markerRecordedEventAttributes?: { details?: Record<string, { payloads: { data: string }[] }> } }) =>
      Object.values(e.markerRecordedEventAttributes?.details ?? {}).flatMap((d) => d.payloads),
    )
    .map((p: { data: string }) => Buffer.from(p.data, 'base64').toString())
  assert.ok(
    patches.some((p: string) => p.includes('"forget-gone-resident"')),
    'the history holds the patch marker',
  )
  await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, 'gone-row/iter-1')
})
