// A strict run configuration under fuzzing: 1,000 malformed configs from a seeded PRNG (test/seed/malformed-configs.ts)
// are each refused by parseRunConfig, naming the mutated field's path, in bounded lines, without throwing; and the
// exact refusals of unknown fields (with their suggestions) and oversized strings.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  MAX_NAME_LENGTH,
  MAX_PATH_LENGTH,
  MAX_URL_LENGTH,
  parseRunConfig,
  RunConfigError,
  runConfig,
} from '../../seed/config.ts'
import { dottedPath, MAX_PROBLEM_LENGTH, MAX_PROBLEMS } from '../../seed/config-problems.ts'
import { checkOverrides } from '../../seed/hyperparameters.ts'
import { cpuSokobanPreset } from '../../seed/presets/cpu.ts'
import { paperPreset } from '../../seed/presets/paper.ts'
import { smokeSokobanPreset } from '../../seed/presets/smoke.ts'
import { microConfig, microImportedConfig } from '../compute/micro.ts'
import { baseConfigs, type FieldPath, HUGE_STRING_LENGTH, malformedConfigs, namesPath } from './malformed-configs.ts'

/** The longest a bounded problem line can be: the cut plus its marker. */
const LONGEST_LINE = MAX_PROBLEM_LENGTH + ' … (99999999 more characters cut)'.length

function problemsOf(input: unknown): string[] {
  const r = parseRunConfig(input)
  return r.ok ? [] : r.problems
}

const clone = <T>(v: T): T => structuredClone(v)
type Loose = Record<string, Record<string, unknown>>

describe('run config fuzzing', () => {
  const cases = malformedConfigs(1000, 16)

  it('starts from bases and presets that parse (the fuzz cannot pass on a schema that refuses everything)', () => {
    const { builtin, imported } = baseConfigs()
    for (const c of [builtin, imported, cpuSokobanPreset(), smokeSokobanPreset(), microConfig()]) {
      assert.deepEqual(problemsOf(c), [])
      assert.deepEqual(problemsOf(JSON.parse(JSON.stringify(c))), [], 'after a JSON round trip')
    }
    assert.deepEqual(problemsOf(paperPreset('household', '/m')), [])
    assert.deepEqual(problemsOf(microImportedConfig('seed', '/m')), [])
  })

  it('is deterministic and covers every mutation class', () => {
    const again = malformedConfigs(1000, 16)
    assert.equal(JSON.stringify(again.map((c) => c.description)), JSON.stringify(cases.map((c) => c.description)))
    const kinds = new Set(cases.flatMap((c) => c.kinds))
    for (const kind of [
      'unknown-field',
      'missing-field',
      'wrong-type',
      'out-of-range',
      'step-cap',
      'huge-string',
      'deep-nesting',
      'array-for-object',
      'null',
      'root',
    ] as const)
      assert.ok(kinds.has(kind), `no ${kind} mutation among ${cases.length}`)
    assert.ok(cases.some((c) => c.kinds.length > 1))
    assert.ok(cases.some((c) => c.description.some((d) => d.includes(`${HUGE_STRING_LENGTH} characters`))))
    const depths = new Set(cases.flatMap((c) => (c.kinds[0] === 'unknown-field' ? [c.paths[0]?.length] : [])))
    for (const depth of [1, 2, 3]) assert.ok(depths.has(depth), `no unknown field at depth ${depth}`)
  })

  it('refuses every one of 1,000 malformed configs, naming each mutated path in bounded lines, without throwing', () => {
    const failures: string[] = []
    for (const c of cases) {
      let result: ReturnType<typeof parseRunConfig>
      try {
        result = parseRunConfig(c.config)
      } catch (error) {
        failures.push(`#${c.index} ${c.description.join(', ')}: threw ${(error as Error).message}`)
        continue
      }
      const what = `#${c.index} ${c.description.join(', ')}`
      if (result.ok) {
        failures.push(`${what}: accepted`)
        continue
      }
      const { problems } = result
      if (problems.length === 0) failures.push(`${what}: refused without a problem`)
      if (problems.length > MAX_PROBLEMS + 1) failures.push(`${what}: ${problems.length} problems`)
      for (const p of problems) {
        if (p.length > LONGEST_LINE) failures.push(`${what}: a problem of ${p.length} characters`)
        if (p.includes('\n')) failures.push(`${what}: a problem across lines: ${p.slice(0, 100)}`)
      }
      const rootReplaced = c.kinds.includes('root')
      if (!rootReplaced && problems.some((p) => p.startsWith('(root)')))
        failures.push(`${what}: a (root) problem: ${problems.join(' | ')}`)
      for (const path of c.paths) {
        if (!problems.some((p) => namesPath(p, path)))
          failures.push(`${what}: nothing about ${dottedPath(path)} in ${problems.join(' | ').slice(0, 600)}`)
      }
      c.kinds.forEach((kind, i) => {
        const path = c.paths[i] as FieldPath
        if (kind === 'unknown-field' && !problems.some((p) => p.startsWith(`${dottedPath(path)}: unknown field`)))
          failures.push(`${what}: ${dottedPath(path)} not reported as an unknown field: ${problems.join(' | ')}`)
      })
      try {
        runConfig(c.config)
        failures.push(`${what}: runConfig accepted`)
      } catch (error) {
        if (!(error instanceof RunConfigError)) failures.push(`${what}: runConfig threw ${String(error)}`)
        else if (error.message.length > (MAX_PROBLEMS + 1) * (LONGEST_LINE + 2) + 100)
          failures.push(`${what}: a RunConfigError message of ${error.message.length} characters`)
      }
    }
    assert.deepEqual(failures.slice(0, 20), [], `${failures.length} of ${cases.length} failed`)
  })
})

describe('strict run config: exact refusals', () => {
  const base = cpuSokobanPreset('seed') as unknown as Loose

  it('names unknown fields at every depth, suggesting a close known field', () => {
    assert.deepEqual(problemsOf({ ...base, foo: 1 }), ['foo: unknown field'])
    assert.deepEqual(problemsOf({ ...base, stage2: { ...base.stage2, lrr: 0.1 } }), [
      'stage2.lrr: unknown field (did you mean stage2.lr?)',
    ])
    assert.deepEqual(problemsOf({ ...base, model: { ...base.model, hiddenSzie: 64 } }), [
      'model.hiddenSzie: unknown field (did you mean model.hiddenSize?)',
    ])
    // a field the training never reads is refused, not trained past with defaults
    assert.ok(
      problemsOf({ ...base, stage2: { lrr: 0.1 } }).includes('stage2.lrr: unknown field (did you mean stage2.lr?)'),
    )
    const analyzer = (base.stage2 as Loose).analyzer
    assert.deepEqual(
      problemsOf({ ...base, stage2: { ...base.stage2, analyzer: { ...analyzer, maxAnswerToken: 1 } } }),
      ['stage2.analyzer.maxAnswerToken: unknown field (did you mean stage2.analyzer.maxAnswerTokens?)'],
    )
    assert.deepEqual(problemsOf({ ...base, retention: { keeplast: 2 } }), [
      'retention.keeplast: unknown field (did you mean retention.keepLast?)',
    ])
    assert.deepEqual(problemsOf({ ...base, stage1: { ...base.stage1, annotator: { kind: 'oracle', model: 'x' } } }), [
      'stage1.annotator.model: unknown field',
    ])
    assert.deepEqual(problemsOf({ ...base, warmstart: { ...base.warmstart, lr2: 1 } }), [
      'warmstart.lr2: unknown field (did you mean warmstart.lr?)',
    ])
    // a field of the other model kind is unknown on this one
    assert.deepEqual(problemsOf({ ...base, model: { ...base.model, folder: '/m' } }), ['model.folder: unknown field'])
  })

  it('suggests only what is genuinely close', () => {
    for (const key of ['foo', 'x', 'learningRate', 'temp', 'batch']) {
      const [problem] = problemsOf({ ...base, stage2: { ...base.stage2, [key]: 1 } })
      assert.equal(problem, `stage2.${key}: unknown field`)
    }
    assert.equal(
      problemsOf({ ...base, stage2: { ...base.stage2, KLCOEF: 1 } })[0],
      'stage2.KLCOEF: unknown field (did you mean stage2.klCoef?)',
    )
  })

  it('bounds every string field and says by how much it is over, without echoing it', () => {
    const imported = baseConfigs().imported as unknown as Loose
    const folder = 'x'.repeat(HUGE_STRING_LENGTH)
    assert.deepEqual(problemsOf({ ...imported, model: { ...imported.model, folder } }), [
      `model.folder: at most ${MAX_PATH_LENGTH} characters, got ${HUGE_STRING_LENGTH}`,
    ])
    assert.deepEqual(problemsOf({ ...imported, model: { ...imported.model, folder: 'x'.repeat(MAX_PATH_LENGTH) } }), [])
    assert.deepEqual(problemsOf({ ...imported, model: { ...imported.model, folder: '' } }), [
      'model.folder: Too small: expected string to have >=1 characters',
    ])
    const annotator = {
      kind: 'openai',
      baseUrl: `https://example.com/${'v'.repeat(MAX_URL_LENGTH)}`,
      model: 'm'.repeat(MAX_NAME_LENGTH + 1),
      maxRetries: 1,
      maxTokens: 10,
    }
    assert.deepEqual(problemsOf({ ...base, stage1: { ...base.stage1, annotator } }), [
      `stage1.annotator.baseUrl: at most ${MAX_URL_LENGTH} characters, got ${MAX_URL_LENGTH + 20}`,
      `stage1.annotator.model: at most ${MAX_NAME_LENGTH} characters, got ${MAX_NAME_LENGTH + 1}`,
    ])
  })

  it('cuts long lines with a marked cut, quotes odd keys and lists at most MAX_PROBLEMS problems', () => {
    const long = 'k'.repeat(100_000)
    const [problem] = problemsOf({ ...base, [long]: 1 })
    assert.equal(problem, `[${JSON.stringify('k'.repeat(64))}… (100000 characters)]: unknown field`)
    assert.deepEqual(problemsOf({ ...base, stage2: { ...base.stage2, 'a b\n': 1 } }), [
      'stage2["a b\\n"]: unknown field',
    ])
    const proto = JSON.parse(`{"__proto__": {"polluted": true}, ${JSON.stringify(base).slice(1)}`)
    assert.deepEqual(problemsOf(proto), ['__proto__: unknown field'])
    assert.equal(({} as { polluted?: boolean }).polluted, undefined)
    const many = clone(base) as Loose
    const stage2 = many.stage2 as Record<string, unknown>
    for (let i = 0; i < 500; i++) stage2[`extra${i}`] = i
    const problems = problemsOf(many)
    assert.equal(problems.length, MAX_PROBLEMS + 1)
    assert.equal(problems.at(-1), `… and ${500 - MAX_PROBLEMS} more problems`)
    assert.equal(problems[0], 'stage2.extra0: unknown field')
  })

  it('says when a required field is missing', () => {
    const { seed: _seed, ...noSeed } = base
    assert.deepEqual(problemsOf(noSeed), ['seed: missing (expected number)'])
    const { lr: _lr, ...stage2 } = base.stage2 as Record<string, unknown>
    assert.deepEqual(problemsOf({ ...base, stage2 }), ['stage2.lr: missing (expected number)'])
  })
})

describe('overrides agree with the run config', () => {
  const config = microConfig()
  const problems = (next: unknown) => {
    const r = checkOverrides(config, {}, next)
    return r.ok ? [] : r.problems
  }
  const FIXED = 'cannot change during a run'

  it('calls a field the run config lacks unknown, with the same suggestion as a config file gets', () => {
    assert.deepEqual(problems({ stage2: { nosuch: 1 } }), ['stage2.nosuch: unknown field'])
    assert.deepEqual(problems({ stage2: { lrr: 0.1 } }), ['stage2.lrr: unknown field (did you mean stage2.lr?)'])
    assert.deepEqual(problems({ model: { hiddenSzie: 64 } }), [
      'model.hiddenSzie: unknown field (did you mean model.hiddenSize?)',
    ])
    assert.deepEqual(problems({ foo: 1 }), ['foo: unknown field'])
    assert.deepEqual(problems({ stage2: { analyzer: { nosuch: 1 } } }), ['stage2.analyzer.nosuch: unknown field'])
  })

  it('keeps "cannot change during a run" for real fields that may not change, at the field given', () => {
    for (const [next, path] of [
      [{ stage2: { iterations: 3 } }, 'stage2.iterations'],
      [{ stage2: { analyzer: { maxPromptTokens: 100 } } }, 'stage2.analyzer.maxPromptTokens'],
      [{ model: { hiddenSize: 64 } }, 'model.hiddenSize'],
      [{ seed: 3 }, 'seed'],
      [{ retention: { keepLast: 2 } }, 'retention.keepLast'],
    ] as const) {
      const [problem, ...rest] = problems(next)
      assert.match(problem ?? '', new RegExp(`^${path.replaceAll('.', '\\.')}: ${FIXED}`))
      assert.deepEqual(rest, [])
    }
  })

  it('bounds the lines of a refused override', () => {
    for (const p of problems({ stage2: { ['z'.repeat(HUGE_STRING_LENGTH)]: 1, lr: 'x'.repeat(HUGE_STRING_LENGTH) } }))
      assert.ok(p.length <= LONGEST_LINE, `${p.length} characters`)
  })
})
