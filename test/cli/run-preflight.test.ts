// What `seedflow run` refuses before it starts anything: a malformed SEEDFLOW_FAULT (it used to be accepted and
// fail the run 21 s later, inside a phase) and an external annotator whose key variable is unset (the run used
// to start and fail in Stage 1); and the hint for a run that waits on the annotator's key. The CLI cases point
// TEMPORAL_ADDRESS at a closed loopback port: a refusal comes before any connection, so nothing is reached; and
// with nothing there, `run` says where it looked and what to do (it used to print a bare "Failed to connect
// before the deadline" after 13.8 s).
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { operatorHint } from '../../cli/operator-hints.ts'
import { CliError } from '../../cli/run-client.ts'
import { annotatorKeyProblem, checkRunSettings, runAnnotates } from '../../cli/run-preflight.ts'
import { freePort } from '../../infra/ports.ts'
import { type RunConfig, runConfig } from '../../seed/config.ts'
import { InvalidFaultSpec, validateFaultVariable } from '../../workers/faults.ts'
import { microConfig } from '../compute/micro.ts'
import { seedflow } from './seedflow-process.ts'

const KEY = `SEEDFLOW_TEST_ANNOTATOR_KEY_${process.pid}`

function withAnnotator(config: RunConfig, change: Partial<RunConfig> = {}): RunConfig {
  const annotator = { kind: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'annotator', apiKeyEnv: KEY }
  return runConfig({ ...config, ...change, stage1: { ...config.stage1, annotator } })
}

describe('seedflow run: checks before anything starts', () => {
  it('names an unset annotator key variable, and says the workers need it too', () => {
    const problem = annotatorKeyProblem(withAnnotator(microConfig('seed')), {})
    assert.equal(
      problem,
      `stage1.annotator is http://127.0.0.1:9/v1 with its key in ${KEY}, which is not set here: set ${KEY} (any ` +
        'non-empty value for a server without keys) for this command, whose worker annotates, and for every ' +
        '`seedflow worker` that serves the run (restart a running one with it); nothing was started',
    )
    assert.equal(annotatorKeyProblem(withAnnotator(microConfig('seed')), { [KEY]: '' }), problem)
  })

  it('accepts a set key, the oracle annotator, and runs that never annotate', () => {
    assert.equal(annotatorKeyProblem(withAnnotator(microConfig('seed')), { [KEY]: 'k' }), undefined)
    assert.equal(annotatorKeyProblem(microConfig('seed'), {}), undefined)
    const grpo = withAnnotator(microConfig('grpo'))
    assert.equal(runAnnotates(grpo), false)
    assert.equal(annotatorKeyProblem(grpo, {}), undefined)
    const forked = withAnnotator(microConfig('seed'), { fork: { run: 'other', at: 'stage1' } })
    assert.equal(annotatorKeyProblem(forked, {}), undefined)
    // a library row that starts from the base still annotates (the library alone)
    assert.equal(runAnnotates(withAnnotator(microConfig('skill-grpo'))), true)
  })

  it('validates SEEDFLOW_FAULT with a typed error naming every bad entry', () => {
    assert.deepEqual(validateFaultVariable({}), [])
    assert.equal(validateFaultVariable({ SEEDFLOW_FAULT: 'rollout:mid-work:1' }).length, 1)
    assert.throws(
      () => validateFaultVariable({ SEEDFLOW_FAULT: 'rollout:middle,store:after-put' }),
      (e: Error) =>
        e instanceof InvalidFaultSpec &&
        e.name === 'InvalidFaultSpec' &&
        e.message === "SEEDFLOW_FAULT is invalid:\n  rollout:middle: unknown point 'middle' (mid-work, after-manifest)",
    )
  })

  it('lists both problems in one refusal', () => {
    assert.throws(
      () => checkRunSettings(withAnnotator(microConfig('seed')), { SEEDFLOW_FAULT: 'nowhere:mid-work' }),
      (e: Error) =>
        e instanceof CliError &&
        /^seedflow run cannot start:\n {2}SEEDFLOW_FAULT is invalid:\n {2}nowhere:mid-work: unknown site 'nowhere'/.test(
          e.message,
        ) &&
        e.message.includes(`\n  stage1.annotator is http://127.0.0.1:9/v1 with its key in ${KEY}`),
    )
  })

  it("the hint for a run waiting on the annotator's key says to restart the workers with it", () => {
    const hint = operatorHint('AnnotatorConfigError', 'r1')
    assert.match(hint, /restart them with it/)
    assert.match(hint, /`seedflow worker --run r1`/)
    assert.match(hint, /then: seedflow retry r1 {3}or: seedflow abort r1$/)
    assert.match(operatorHint('AnnotatorAuthError', 'r1'), /restart the run's workers with it/)
  })
})

describe('seedflow run refuses before it connects (the CLI as a child process)', () => {
  let dir: string
  let env: NodeJS.ProcessEnv

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'seedflow-preflight-'))
    // nothing listens there: an old build that went on would fail on the connection instead of refusing
    env = {
      TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
      SEEDFLOW_ARTIFACTS_DIR: join(dir, 'artifacts'),
      SEEDFLOW_S3_BUCKET: '',
      SEEDFLOW_HOME: join(dir, 'home'),
      SEEDFLOW_FAULT: '',
      [KEY]: '',
    }
  })
  after(() => rmSync(dir, { recursive: true, force: true }))

  function file(name: string, config: RunConfig): string {
    const path = join(dir, `${name}.json`)
    writeFileSync(path, JSON.stringify(config))
    return path
  }

  it('a malformed SEEDFLOW_FAULT: exit 1 naming the entry, before any connection', async () => {
    const r = await seedflow(['run', file('fault', microConfig('seed'))], { ...env, SEEDFLOW_FAULT: 'rollout:middle' })
    assert.equal(r.code, 1, `${r.out}\n${r.err}`)
    assert.match(r.err, /seedflow run cannot start:\n {2}SEEDFLOW_FAULT is invalid:\n {2}rollout:middle: unknown point/)
    assert.doesNotMatch(r.out, /Temporal|starting workflow/)
  })

  it('no Temporal server at TEMPORAL_ADDRESS: exit 1 within seconds, naming the address and `seedflow up`', async () => {
    const r = await seedflow(['run', file('nothing-there', microConfig('seed'))], env)
    assert.equal(r.code, 1, `${r.out}\n${r.err}`)
    assert.ok(r.err.includes(`seedflow: cannot reach Temporal at ${env.TEMPORAL_ADDRESS} within 5 s (`), r.err)
    assert.match(r.err, /unset TEMPORAL_ADDRESS .* \(`seedflow up` starts it\)\n$/)
    assert.doesNotMatch(r.out, /starting workflow/)
  })

  it('an unset annotator key variable: exit 1 naming it, before any connection', async () => {
    const r = await seedflow(['run', file('annotator', withAnnotator(microConfig('seed')))], env)
    assert.equal(r.code, 1, `${r.out}\n${r.err}`)
    assert.ok(r.err.includes(`its key in ${KEY}, which is not set here`), r.err)
    assert.ok(r.err.includes('`seedflow worker` that serves the run (restart a running one with it)'), r.err)
    assert.doesNotMatch(r.out, /Temporal|starting workflow/)
  })
})
