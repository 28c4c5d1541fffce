// onnxruntime-node 1.30 opens an empty /tmp/mat-debug-<pid>.log (its 1DS telemetry's debug log) in every
// process that creates a session, unless ORT_DISABLE_TELEMETRY=1 is set before then: the engine sets it.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'

const CHILD = fileURLToPath(new URL('./ort-run-child.ts', import.meta.url))

/**
 * Variables by which ORT 1.30 recognizes a CI machine and keeps its telemetry off by itself (strings beside its
 * telemetry code in libonnxruntime.so): the child runs without them, so the test shows the engine's own opt-out
 * on a CI machine as on a user's.
 */
const CI_VARIABLES = [
  'CI',
  'TF_BUILD',
  'GITHUB_ACTIONS',
  'GITLAB_CI',
  'CIRCLECI',
  'TRAVIS',
  'JENKINS_URL',
  'CODEBUILD_BUILD_ID',
  'BUILDKITE',
  'TEAMCITY_VERSION',
]

/** Runs the child with `telemetry` as ORT_DISABLE_TELEMETRY (unset when undefined); returns its debug log's path. */
function runChild(telemetry: string | undefined): string {
  const env = { ...process.env }
  for (const name of CI_VARIABLES) delete env[name]
  delete env.ORT_DISABLE_TELEMETRY
  if (telemetry !== undefined) env.ORT_DISABLE_TELEMETRY = telemetry
  const child = spawnSync(process.execPath, ['--import', 'tsx', CHILD], { env, encoding: 'utf8', timeout: 60_000 })
  assert.equal(child.status, 0, child.stderr)
  const pid = child.stdout.trim()
  assert.match(pid, /^\d+$/)
  return join('/tmp', `mat-debug-${pid}.log`)
}

describe('onnxruntime telemetry', () => {
  it('a process that loads the engine and runs a graph leaves no /tmp/mat-debug-<pid>.log', () => {
    const log = runChild(undefined)
    const left = existsSync(log)
    rmSync(log, { force: true })
    assert.equal(left, false, `${log} was left behind`)
  })

  it("keeps an operator's own ORT_DISABLE_TELEMETRY=0 (ORT's debug log appears: the cause is this setting)", () => {
    const log = runChild('0')
    const left = existsSync(log)
    rmSync(log, { force: true })
    assert.equal(left, true, `${log} missing: onnxruntime no longer writes it, and the engine's opt-out may go`)
  })
})
