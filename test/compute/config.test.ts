import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { scoresControl } from '../../compute/plan.ts'
import { ENV_NAMES, ENVS } from '../../envs/index.ts'
import { ENV_STEP_CAPS, parseRunConfig, RUN_ENV_NAMES, RunConfigError, runConfig } from '../../seed/config.ts'
import { cpuSokobanPreset } from '../../seed/presets/cpu.ts'
import { paperPreset } from '../../seed/presets/paper.ts'

describe('run config', () => {
  it('mirrors the environment table (names and step caps)', () => {
    assert.deepEqual([...RUN_ENV_NAMES].sort(), [...ENV_NAMES].sort())
    for (const name of ENV_NAMES) assert.equal(ENV_STEP_CAPS[name], ENVS[name].maxSteps, name)
  })

  it('accepts the CPU preset and the paper preset of every environment', () => {
    assert.equal(cpuSokobanPreset().model.kind, 'builtin')
    for (const env of RUN_ENV_NAMES) {
      const c = paperPreset(env, '/models/qwen2.5-3b')
      assert.equal(c.stage2.lr, 1e-6)
      assert.equal(c.stage2.opdCoef, 0.01)
      assert.equal(c.evaluation.temperature, 0.4)
    }
    assert.equal(paperPreset('searchqa', 'm').stage2.klCoef, 0.001)
    assert.equal(paperPreset('shop', 'm').stage2.advantageMode, 'mean')
    assert.equal(paperPreset('sokoban', 'm').stage2.tasksPerStep, 32)
  })

  it('lists every bad field with its path and reason', () => {
    const c = cpuSokobanPreset() as unknown as Record<string, Record<string, unknown>>
    const bad = {
      ...c,
      algorithm: 'ppo',
      stage2: { ...c.stage2, groupSize: 0, maxEnvSteps: 40, opdGate: 'teacher' },
      evaluation: { ...c.evaluation, temperature: -1 },
    }
    const r = parseRunConfig(bad)
    assert.equal(r.ok, false)
    if (r.ok) return
    const paths = r.problems.map((p) => p.split(':')[0])
    assert.ok(paths.includes('algorithm'), r.problems.join('\n'))
    assert.ok(paths.includes('stage2.groupSize'), r.problems.join('\n'))
    assert.ok(paths.includes('stage2.opdGate'), r.problems.join('\n'))
    assert.ok(paths.includes('evaluation.temperature'), r.problems.join('\n'))
    assert.throws(() => runConfig(bad), RunConfigError)
  })

  it("defaults the OPD gate to the reference's and accepts the control gate", () => {
    assert.equal(runConfig(cpuSokobanPreset()).stage2.opdGate, 'student')
    const c = cpuSokobanPreset()
    assert.equal(runConfig({ ...c, stage2: { ...c.stage2, opdGate: 'control' } }).stage2.opdGate, 'control')
  })

  it('keeps the controlGap diagnostic absent unless asked, so the config hash of a run without it is unchanged', () => {
    const c = cpuSokobanPreset()
    assert.equal('controlGap' in runConfig(c).stage2, false)
    assert.equal(runConfig({ ...c, stage2: { ...c.stage2, controlGap: true } }).stage2.controlGap, true)
    assert.equal(scoresControl(runConfig(c).stage2), false)
    assert.equal(scoresControl({ opdGate: 'student', controlGap: true }), true)
    assert.equal(scoresControl({ opdGate: 'control' }), true)
  })

  it('checks fields against each other: step caps, context, warm-start required for the built-in model', () => {
    const c = cpuSokobanPreset()
    const problems = (input: unknown) => {
      const r = parseRunConfig(input)
      return r.ok ? [] : r.problems
    }
    assert.deepEqual(problems({ ...c, stage2: { ...c.stage2, maxEnvSteps: 40 } }), [
      "stage2.maxEnvSteps: 40 exceeds sokoban's step cap of 15",
    ])
    assert.match(
      problems({ ...c, prompt: { ...c.prompt, maxPromptTokens: 630 } }).join('\n'),
      /^prompt\.maxPromptTokens: prompt 630 \+ response 24 tokens exceed the model's 640 positions$/,
    )
    assert.deepEqual(problems({ ...c, warmstart: null }), [
      'warmstart: the built-in model trains from scratch: it needs warm-start settings',
      'stage1.actingData: demonstrations replays the warm-start, which this run does not have',
    ])
    const imported = {
      ...c,
      model: { kind: 'imported', folder: '/m', maxPositions: 4096, lora: { rank: 8, targets: ['q_proj', 'v_proj'] } },
      stage1: { ...c.stage1, actingData: 'rollouts' },
    }
    // an imported model may warm-start (behaviour cloning from its own weights), and Stage 1 may then replay it
    assert.deepEqual(problems(imported), [])
    assert.deepEqual(problems({ ...imported, stage1: { ...c.stage1, actingData: 'demonstrations' } }), [])
    assert.deepEqual(problems({ ...imported, warmstart: null }), [])
    assert.deepEqual(
      problems({ ...imported, warmstart: null, stage1: { ...c.stage1, actingData: 'demonstrations' } }),
      ['stage1.actingData: demonstrations replays the warm-start, which this run does not have'],
    )
  })
})
