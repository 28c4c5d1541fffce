// The README's transcript of `npx seedflow run` has the format the CLI prints today: its progress lines are rendered
// by the CLI's own watcher (cli/progress.ts, driven by a stand-in client from fixed statuses) and its table by
// `seedflow run`'s own table code (cli/run-command.ts), and every such line of the README, numbers and hashes
// masked, must be one of those renderings. A change of format fails here until `npm run readme:transcript` runs.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import type { Client } from '@temporalio/client'
import { defaultPayloadConverter } from '@temporalio/common'
import { between } from '../../bench/readme-markers.ts'
import { ELLIPSIS, TRANSCRIPT, transcriptBlock, transcriptExcerpt } from '../../bench/readme-transcript.ts'
import { watchRun } from '../../cli/progress.ts'
import { heldOutTable } from '../../cli/run-command.ts'
import { PROJECT_ROOT } from '../../infra/tools.ts'
import type { AnnotationCounts, PhaseProgress } from '../../records/contracts.ts'
import type { Evaluation, RunStatus } from '../../workflows/seed-run.ts'

const README = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8')
const block = between(README, TRANSCRIPT, 'README.md')
const transcript = /```text\n([\s\S]*?)\n```/.exec(block)?.[1]?.split('\n') ?? []
const runId = /^seedflow: run (\S+): /.exec(transcript[0] ?? '')?.[1] ?? 'no-run-line'

/**
 * Numbers and 12-digit hashes masked, runs of spaces (the table's padding) made one, and in progress lines the
 * names of phases (the run's, the iteration's, a heartbeat's): which phase a line names is not its format.
 */
const mask = (line: string) =>
  line
    .replace(/\b[0-9a-f]{12}\b/g, 'H')
    .replace(/^(seedflow: \[\d+:\d\d\]) [a-z][\w-]*(?=:|$)/, '$1 P')
    .replace(/^(seedflow: \[\d+:\d\d\] .*)\): [a-z][\w-]*$/, '$1): P')
    .replace(/^(seedflow: \[\d+:\d\d\] P): [a-z][\w-]* step /, '$1: P step ')
    .replace(/\d+(\.\d+)?/g, '#')
    .replace(/ {2,}/g, ' ')

const evaluation = (label: string, iteration: number, split?: string): Evaluation => ({
  label,
  iteration,
  ...(split ? { split } : {}),
  success: 0.384,
  standardError: 0.022,
  macroSuccess: 0.384,
  tasks: 500,
  checkpointSha256: 'a9c921baa85d'.padEnd(64, '0'),
  manifestKey: `runs/${runId}/manifest.json`,
})

const status = (phase: string, evaluations: Evaluation[], more: Partial<RunStatus> = {}): RunStatus => ({
  runId,
  phase,
  iteration: 0,
  iterations: 12,
  algorithm: 'seed',
  evaluations,
  paused: false,
  held: false,
  awaitingOperator: null,
  hyperparameters: [],
  configSha256: 'c',
  aborted: null,
  ...more,
})

interface Step {
  status: RunStatus
  /** The run's pending activities' heartbeat details. */
  pending?: PhaseProgress[]
  /** The iteration child's SeedPhase. */
  childPhase?: string
}

/** Drives the CLI's watcher through `steps` (one per poll) and returns every line it prints, as `say` prints it. */
async function watched(steps: readonly Step[], final: Evaluation[]): Promise<string[]> {
  const lines: string[] = []
  let index = 0
  let current = steps[0] as Step
  let consumed: () => void = () => {}
  const allPolled = new Promise<void>((resolve) => {
    consumed = resolve
  })
  const client = {
    withAbortSignal: (_signal: AbortSignal, fn: () => Promise<unknown>) => fn(),
    workflow: {
      getHandle: (id: string) => ({
        query: async () => {
          if (index === steps.length) consumed() // every step's poll has ended: this one repeats the last
          current = steps[Math.min(index++, steps.length - 1)] as Step
          return current.status
        },
        describe: async () =>
          id === runId
            ? {
                raw: {
                  pendingActivities: (current.pending ?? []).map((p) => ({
                    heartbeatDetails: { payloads: [defaultPayloadConverter.toPayload(p)] },
                  })),
                },
                searchAttributes: {},
              }
            : { raw: { pendingActivities: [] }, searchAttributes: { SeedPhase: [current.childPhase ?? 'rollout'] } },
      }),
    },
  } as unknown as Client
  const watcher = watchRun(client, runId, (line) => lines.push(`seedflow: ${line}`), 1)
  await allPolled
  await watcher.stop(final)
  return lines
}

const base = evaluation('base', -1)
const stage1 = evaluation('stage 1', -1)
const last = evaluation('iteration 11', 11)
const annotation = (failed: number): AnnotationCounts => ({
  trajectories: 128,
  annotated: 128 - failed,
  requestFailures: 0,
  unparsed: failed,
})

/** Every progress line the CLI prints on the way of a run like the main job, as fixed inputs render them. */
async function progressShapes(): Promise<Set<string>> {
  const lines: string[] = []
  for (const split of [undefined, 'test-seen']) {
    const b = { ...base, ...(split ? { split } : {}) }
    const s = { ...stage1, ...(split ? { split } : {}) }
    for (const failed of [0, 8])
      lines.push(
        ...(await watched(
          [
            { status: status('prepare', []) },
            { status: status('prepare', []), pending: [{ phase: 'warmstart', step: 10, steps: 240, loss: 1.234 }] },
            {
              status: status('prepare', []),
              pending: [{ phase: 'warmstart', step: 120, steps: 240, loss: 0.5, successRate: 0.32 }],
            },
            { status: status('prepare', []), pending: [{ phase: 'warmstart', step: 1, steps: 9, successRate: 0.3 }] },
            { status: status('evaluate', []), pending: [{ phase: 'evaluate', step: 0, steps: 16 }] },
            { status: status('evaluate', [b]) },
            { status: status('stage1', [b], { annotation: annotation(failed) }) },
            { status: status('iteration', [b, s], { annotation: annotation(failed) }), childPhase: 'rollout' },
            {
              status: status('iteration', [b, s], { annotation: annotation(failed), iteration: 11 }),
              childPhase: 'update',
            },
            { status: status('evaluate', [b, s], { annotation: annotation(failed) }) },
          ],
          [b, s, { ...last, ...(split ? { split } : {}) }],
        )),
      )
  }
  return new Set(lines.map(mask))
}

function tableShapes(): Set<string> {
  const lines = [undefined, 'test-seen'].flatMap((split) =>
    heldOutTable(
      runId,
      [base, stage1, last].map((e) => ({ ...e, ...(split ? { split } : {}) })),
      'warm-start',
    ),
  )
  return new Set(lines.map(mask))
}

/** The transcript's lines that no rendering matches, with why. */
function mismatches(lines: readonly string[], progress: Set<string>, table: Set<string>): string[] {
  return lines.flatMap((line) => {
    if (line === '' || line === ELLIPSIS) return []
    if (line.startsWith('seedflow: [')) return progress.has(mask(line)) ? [] : [`progress line not as printed: ${line}`]
    if (line.startsWith('held-out success of run') || line.startsWith('  '))
      return table.has(mask(line)) ? [] : [`table line not as printed: ${line}`]
    if (line.startsWith('seedflow: ')) return [] // the run's other lines: no formatter of their own
    return [`not a line seedflow run prints: ${line}`]
  })
}

describe('README transcript', () => {
  it('sits between the transcript markers in a text block that starts with the run line', () => {
    assert.ok(transcript.length > 0, 'no ```text block between the transcript markers')
    assert.match(transcript[0] ?? '', /^seedflow: run \S+: /)
  })

  it('says which command wrote it and when', () => {
    assert.match(block, /npm run readme:transcript/)
    assert.match(block, /\d{4}-\d\d-\d\d,\s+\d+\s+cores\b[\s\S]*\d+ (min|s)\b[\s\S]*wall/)
  })

  it('has every progress and table line as the CLI prints it today', async () => {
    assert.deepEqual(mismatches(transcript, await progressShapes(), tableShapes()), [])
  })

  it('shows the evaluations, the annotation, an iteration and the final row', () => {
    const has = (pattern: RegExp) => transcript.some((line) => pattern.test(line))
    for (const pattern of [
      /^seedflow: \[\d+:\d\d\] evaluation base: /,
      /^seedflow: \[\d+:\d\d\] stage 1 annotation: /,
      /^seedflow: \[\d+:\d\d\] iteration \d+ \(/,
      /^held-out success of run /,
      /^ {2}warm-start /,
      /^ {2}iteration \d+ \(final\) /,
    ])
      assert.ok(has(pattern), `the transcript lacks a line like ${pattern}`)
  })

  it("shows the warm-start's steps with their loss, unless it is the marked smoke-size placeholder", (t) => {
    if (block.includes('smoke-size placeholder')) {
      t.skip('the README holds the smoke-size placeholder, whose warm-start ends before the first progress poll')
      return
    }
    assert.ok(transcript.some((line) => /^seedflow: \[\d+:\d\d\] prepare: warmstart step \d+\/\d+, loss /.test(line)))
  })

  it('refuses a line of the format before macro averages and checkpoint hashes', async () => {
    const old = [
      'seedflow: [4:54] evaluation base: 38.4% ± 2.2% (500 tasks)',
      '  warm-start            38.4% ± 2.2% (500 tasks)',
    ]
    assert.deepEqual(mismatches(old, await progressShapes(), tableShapes()), [
      `progress line not as printed: ${old[0]}`,
      `table line not as printed: ${old[1]}`,
    ])
  })
})

describe('transcriptExcerpt', () => {
  const clock = (s: number) => `[${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}]`
  const stdout = [
    'seedflow: run r: seed on sokoban, 3 iterations × 2 tasks × 2 samples (/tmp/home-x/run.json)',
    'seedflow: [0:00] prepare',
    ...[10, 20, 30].map((k, i) => `seedflow: ${clock(i + 1)} prepare: warmstart step ${k}/240, loss 1.0`),
    ...[0, 1].map((k) => `seedflow: ${clock(5)} prepare: evaluate step ${k}/16`),
    'seedflow: [0:06] evaluation base: 1.0% ± 0.5% (16 tasks)',
    'seedflow: [0:07] stage1',
    'seedflow: [0:08] stage 1 annotation: annotated 4 of 4 trajectories',
    ...[0, 1, 2].flatMap((k) => ['rollout', 'update'].map((p) => `seedflow: ${clock(9 + k)} iteration ${k} (x): ${p}`)),
    'seedflow: [0:12] evaluate',
    '',
    'held-out success of run r:',
    '',
  ].join('\n')

  it('keeps results, the last training line of each phase, the first iteration and the last line of a run', () => {
    assert.deepEqual(transcriptExcerpt(stdout, '/tmp/home-x'), [
      'seedflow: run r: seed on sokoban, 3 iterations × 2 tasks × 2 samples ($SEEDFLOW_HOME/run.json)',
      ELLIPSIS,
      'seedflow: [0:03] prepare: warmstart step 30/240, loss 1.0',
      ELLIPSIS,
      'seedflow: [0:05] prepare: evaluate step 1/16',
      'seedflow: [0:06] evaluation base: 1.0% ± 0.5% (16 tasks)',
      'seedflow: [0:07] stage1',
      'seedflow: [0:08] stage 1 annotation: annotated 4 of 4 trajectories',
      'seedflow: [0:09] iteration 0 (x): rollout',
      ELLIPSIS,
      'seedflow: [0:12] evaluate',
      '',
      'held-out success of run r:',
    ])
  })
})

describe('transcriptBlock', () => {
  const run = {
    command: 'npx seedflow run --run-id r',
    date: '2026-12-04',
    cores: 2,
    loadAverage: 0.31,
    wallSeconds: 1102.4,
  }

  it('states the command, the date, the machine and the wall time of the main job', () => {
    const block = transcriptBlock(run, ['seedflow: run r: …'])
    assert.match(
      block,
      /^`npx seedflow run --run-id r` on 2026-12-04, 2 cores \(load average 0\.3 before\), 18 min 22 s wall/,
    )
    assert.doesNotMatch(block, /placeholder/)
    assert.ok(block.endsWith('```text\nseedflow: run r: …\n```'))
  })

  it('marks a run of a smaller preset as the smoke-size placeholder', () => {
    const block = transcriptBlock({ ...run, preset: 'smoke-sokoban' }, [])
    assert.match(
      block,
      /^\*\*\(smoke-size placeholder, 2026-12-04; the main job's transcript is regenerated by `npm run readme:transcript`\)\*\*/,
    )
    assert.match(block, /`npm run readme:transcript -- --preset smoke-sokoban`/)
  })
})
