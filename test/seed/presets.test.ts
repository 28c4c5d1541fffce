// The presets (seed/presets/): every one parses for every environment it has and every algorithm, each call is
// a fresh config, and a few key values per family are pinned so that an accidental edit of a preset is caught.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ALGORITHM_NAMES } from '../../seed/algorithms.ts'
import { parseRunConfig, RUN_ENV_NAMES, type RunConfig } from '../../seed/config.ts'
import { CPU_PRESETS, cpuHouseholdPreset, cpuPreset, cpuSokobanPreset } from '../../seed/presets/cpu.ts'
import { paperPreset } from '../../seed/presets/paper.ts'
import { smokeSokobanPreset } from '../../seed/presets/smoke.ts'
import { cpuHouseholdSmollm2Preset } from '../../seed/presets/smollm2.ts'

/** Every preset of every family for every algorithm, by name. */
function everyPreset(): [string, RunConfig][] {
  const all: [string, RunConfig][] = []
  for (const algorithm of ALGORITHM_NAMES) {
    for (const env of RUN_ENV_NAMES) all.push([`paper ${env} ${algorithm}`, paperPreset(env, '/models/m', algorithm)])
    for (const [env, preset] of Object.entries(CPU_PRESETS)) all.push([`cpu ${env} ${algorithm}`, preset(algorithm)])
    all.push([`smoke sokoban ${algorithm}`, smokeSokobanPreset(algorithm)])
    all.push([`smollm2 household ${algorithm}`, cpuHouseholdSmollm2Preset('/models/smollm2', algorithm)])
  }
  return all
}

/** The values a preset's Stage 2, evaluation and prompt are pinned by. */
function keyValues(c: RunConfig) {
  return {
    env: c.env,
    model: c.model.kind,
    maxPositions: c.model.maxPositions,
    historyWindow: c.prompt.historyWindow,
    maxPromptTokens: c.prompt.maxPromptTokens,
    warmstartSteps: c.warmstart?.steps ?? null,
    stage1Tasks: c.stage1.tasks,
    stage1Steps: c.stage1.steps,
    iterations: c.stage2.iterations,
    tasksPerStep: c.stage2.tasksPerStep,
    groupSize: c.stage2.groupSize,
    maxEnvSteps: c.stage2.maxEnvSteps,
    miniBatchSize: c.stage2.miniBatchSize,
    lr: c.stage2.lr,
    klCoef: c.stage2.klCoef,
    entropyCoef: c.stage2.entropyCoef,
    opdCoef: c.stage2.opdCoef,
    advantageMode: c.stage2.advantageMode,
    perEpisodeWeight: c.stage2.perEpisodeWeight,
    analyzerPromptTokens: c.stage2.analyzer.maxPromptTokens,
    evaluationTasks: c.evaluation.tasks,
    evaluationEvery: c.evaluation.every,
    seed: c.seed,
    threads: c.threads,
  }
}

describe('presets', () => {
  it('parse with parseRunConfig for every environment and algorithm, and keep the algorithm asked for', () => {
    const all = everyPreset()
    assert.equal(all.length, ALGORITHM_NAMES.length * (RUN_ENV_NAMES.length + Object.keys(CPU_PRESETS).length + 2))
    for (const [name, c] of all) {
      const parsed = parseRunConfig(c)
      assert.ok(parsed.ok, `${name}: ${parsed.ok ? '' : parsed.problems.join('; ')}`)
      assert.deepEqual(parsed.config, c, name)
      assert.equal(c.algorithm, name.split(' ')[2], name)
    }
  })

  it("default to the 'seed' algorithm", () => {
    for (const c of [paperPreset('shop', '/m'), cpuSokobanPreset(), cpuHouseholdPreset(), smokeSokobanPreset()])
      assert.equal(c.algorithm, 'seed')
    assert.deepEqual(cpuPreset('household'), cpuHouseholdPreset('seed'))
  })

  it("truncate prompts by dropping the oldest history (prompt.truncation defaults to 'drop-oldest')", () => {
    for (const [name, c] of everyPreset()) {
      assert.equal(c.prompt.truncation, 'drop-oldest', name)
      // a config written before the field parses to the same config
      const { truncation: _t, ...older } = c.prompt
      const parsed = parseRunConfig({ ...c, prompt: older })
      assert.ok(parsed.ok, name)
      assert.deepEqual(parsed.config, c, name)
    }
    const c = cpuSokobanPreset()
    const left = parseRunConfig({ ...c, prompt: { ...c.prompt, truncation: 'left' } })
    assert.ok(left.ok && left.config.prompt.truncation === 'left')
    const right = parseRunConfig({ ...c, prompt: { ...c.prompt, truncation: 'right' } })
    assert.ok(!right.ok && right.problems.some((p) => p.startsWith('prompt.truncation')), JSON.stringify(right))
  })

  it('return a fresh config on every call (editing one leaves the preset as it was)', () => {
    const edited = cpuSokobanPreset()
    edited.stage2.lr = 1
    edited.stage1.annotator = {
      kind: 'openai',
      baseUrl: 'http://x',
      model: 'm',
      apiKeyEnv: 'K',
      concurrency: 1,
      timeoutSeconds: 1,
      maxRetries: 0,
      temperature: 0,
      maxTokens: 1,
    }
    const paper = paperPreset('sokoban', '/m')
    paper.stage2.analyzer.maxPromptTokens = 1
    assert.equal(cpuSokobanPreset().stage2.lr, 2e-4)
    assert.deepEqual(smokeSokobanPreset().stage1.annotator, { kind: 'oracle' })
    assert.equal(paperPreset('sokoban', '/m').stage2.analyzer.maxPromptTokens, 24576)
    assert.equal(paperPreset('household', '/m').stage2.analyzer.maxPromptTokens, 16384)
  })

  it("paper: a model with fewer positions than the paper's 32,768 gets its own, the analyzer's budgets fitted", () => {
    const smol = paperPreset('sokoban', '/m', 'seed', 8192) // SmolLM2-135M
    assert.equal(smol.model.maxPositions, 8192)
    assert.deepEqual(smol.stage2.analyzer, { maxPromptTokens: 6144, maxAnswerTokens: 2048 })
    assert.equal(paperPreset('sokoban', '/m', 'seed', 65536).model.maxPositions, 32768)
  })

  it('paper: docs/algorithm.md §7 per environment, an imported model and no warm-start', () => {
    const rows = Object.fromEntries(RUN_ENV_NAMES.map((env) => [env, keyValues(paperPreset(env, '/models/m'))]))
    const shared = {
      model: 'imported',
      maxPositions: 32768,
      warmstartSteps: null,
      stage1Tasks: 180,
      stage1Steps: 540,
      lr: 1e-6,
      opdCoef: 0.01,
      perEpisodeWeight: false,
      evaluationEvery: 5,
      seed: 0,
      threads: 2,
    }
    const row = (env: string, r: object) => ({ env, ...shared, ...r })
    assert.deepEqual(rows, {
      sokoban: row('sokoban', {
        historyWindow: 2,
        maxPromptTokens: 1024,
        iterations: 150,
        tasksPerStep: 32,
        groupSize: 8,
        maxEnvSteps: 15,
        miniBatchSize: 64,
        klCoef: 0.01,
        entropyCoef: 0.001,
        advantageMode: 'meanStd',
        analyzerPromptTokens: 24576,
        evaluationTasks: 128,
      }),
      ezpoints: row('ezpoints', {
        historyWindow: 0,
        maxPromptTokens: 1024,
        iterations: 100,
        tasksPerStep: 16,
        groupSize: 8,
        maxEnvSteps: 8,
        miniBatchSize: 128,
        klCoef: 0.01,
        entropyCoef: 0.001,
        advantageMode: 'meanStd',
        analyzerPromptTokens: 16384,
        evaluationTasks: 128,
      }),
      household: row('household', {
        historyWindow: 5,
        maxPromptTokens: 2048,
        iterations: 150,
        tasksPerStep: 16,
        groupSize: 8,
        maxEnvSteps: 30,
        miniBatchSize: 256,
        klCoef: 0.01,
        entropyCoef: 0.001,
        advantageMode: 'meanStd',
        analyzerPromptTokens: 16384,
        evaluationTasks: 128,
      }),
      shop: row('shop', {
        historyWindow: 2,
        maxPromptTokens: 4096,
        iterations: 160,
        tasksPerStep: 16,
        groupSize: 8,
        maxEnvSteps: 15,
        miniBatchSize: 64,
        klCoef: 0.01,
        entropyCoef: 0.001,
        advantageMode: 'mean',
        analyzerPromptTokens: 16384,
        evaluationTasks: 128,
      }),
      searchqa: row('searchqa', {
        historyWindow: 4,
        maxPromptTokens: 4096,
        iterations: 150,
        tasksPerStep: 128,
        groupSize: 8,
        maxEnvSteps: 4,
        miniBatchSize: 512,
        klCoef: 0.001,
        entropyCoef: 0,
        advantageMode: 'meanStd',
        analyzerPromptTokens: 16384,
        evaluationTasks: 512,
        evaluationEvery: 150,
      }),
    })
    for (const env of RUN_ENV_NAMES) {
      const c = paperPreset(env, '/models/m')
      assert.deepEqual(c.model, { kind: 'imported', folder: '/models/m', maxPositions: 32768 })
      assert.equal(c.stage1.maxEnvSteps, c.stage2.maxEnvSteps)
      assert.equal(c.evaluation.maxEnvSteps, c.stage2.maxEnvSteps)
      assert.equal(c.prompt.maxResponseTokens, 512)
      const visual = env === 'sokoban' || env === 'ezpoints'
      assert.equal(c.stage2.analyzer.maxAnswerTokens, visual ? 2048 : 4096, `${env}'s analyzer answer budget`)
      assert.equal(c.stage2.invalidPenalty, env === 'searchqa' ? 0.01 : 0.1, `${env}'s invalid-action penalty`)
      assert.equal(c.stage2.clampLogRatios, true)
      assert.equal(c.stage2.padToMiniBatch, false)
    }
  })

  it('cpu: the tuned built-in presets of sokoban and household', () => {
    assert.deepEqual(Object.keys(CPU_PRESETS), ['sokoban', 'household'])
    assert.equal(CPU_PRESETS.sokoban, cpuSokobanPreset)
    assert.throws(() => cpuPreset('shop'), /no CPU preset for shop yet \(CPU presets: sokoban, household\)/)
    const shared = {
      model: 'builtin',
      maxPositions: 640,
      stage1Steps: 300,
      iterations: 12,
      groupSize: 8,
      lr: 2e-4,
      klCoef: 0.01,
      entropyCoef: 0.001,
      opdCoef: 0.01,
      advantageMode: 'meanStd',
      perEpisodeWeight: true,
      evaluationEvery: 0,
      seed: 1,
      threads: 2,
    }
    assert.deepEqual(keyValues(cpuPreset('sokoban')), {
      env: 'sokoban',
      ...shared,
      historyWindow: 0,
      maxPromptTokens: 400,
      warmstartSteps: 240,
      stage1Tasks: 48,
      tasksPerStep: 16,
      maxEnvSteps: 15,
      miniBatchSize: 512,
      analyzerPromptTokens: 400,
      evaluationTasks: 500,
    })
    assert.deepEqual(keyValues(cpuPreset('household')), {
      env: 'household',
      ...shared,
      historyWindow: 1,
      maxPromptTokens: 320,
      warmstartSteps: 1200,
      stage1Tasks: 32,
      tasksPerStep: 6,
      maxEnvSteps: 30,
      miniBatchSize: 256,
      analyzerPromptTokens: 480,
      evaluationTasks: 300,
    })
    const sokoban = cpuSokobanPreset()
    assert.equal(sokoban.model.kind === 'builtin' && sokoban.model.learnedPositions, true)
    assert.equal(sokoban.stage1.actingData, 'demonstrations')
    const household = cpuHouseholdPreset()
    assert.equal(household.warmstart?.expertThoughts, true)
    assert.equal(household.warmstart?.keepBest, true)
    assert.equal(household.warmstart?.labelNoise, 0.05)
  })

  it('smoke: the CPU Sokoban preset on tiny sizes, three iterations, one thread', () => {
    const c = smokeSokobanPreset()
    assert.deepEqual(keyValues(c), {
      env: 'sokoban',
      model: 'builtin',
      maxPositions: 640,
      historyWindow: 0,
      maxPromptTokens: 400,
      warmstartSteps: 3,
      stage1Tasks: 2,
      stage1Steps: 2,
      iterations: 3,
      tasksPerStep: 2,
      groupSize: 2,
      maxEnvSteps: 3,
      miniBatchSize: 4,
      lr: 2e-4,
      klCoef: 0.01,
      entropyCoef: 0.001,
      opdCoef: 0.01,
      advantageMode: 'meanStd',
      perEpisodeWeight: true,
      analyzerPromptTokens: 400,
      evaluationTasks: 16,
      evaluationEvery: 0,
      seed: 1,
      threads: 1,
    })
    assert.equal(c.model.kind === 'builtin' && c.model.numLayers, 1)
    assert.equal(c.model.kind === 'builtin' && c.model.learnedPositions, false)
    assert.equal(c.warmstart?.demoTasks, 12)
    assert.equal(c.stage2.analyzer.maxAnswerTokens, 12)
    // what it keeps of the CPU Sokoban preset
    const cpu = cpuSokobanPreset()
    assert.deepEqual(c.prompt, cpu.prompt)
    assert.equal(c.warmstart?.formatTokenWeight, cpu.warmstart?.formatTokenWeight)
    assert.equal(c.stage1.actingData, cpu.stage1.actingData)
  })

  it('cpu-household-smollm2: SmolLM2 with LoRA on household, warm-started on demonstrations, sized for 2 cores', () => {
    const c = cpuHouseholdSmollm2Preset('/models/smollm2')
    assert.deepEqual(keyValues(c), {
      env: 'household',
      model: 'imported',
      maxPositions: 2048,
      historyWindow: 1,
      maxPromptTokens: 480,
      warmstartSteps: 120,
      stage1Tasks: 8,
      stage1Steps: 30,
      iterations: 8,
      tasksPerStep: 1,
      groupSize: 4,
      maxEnvSteps: 15,
      miniBatchSize: 16,
      lr: 2e-5,
      klCoef: 0.01,
      entropyCoef: 0.001,
      opdCoef: 0.01,
      advantageMode: 'meanStd',
      perEpisodeWeight: true,
      analyzerPromptTokens: 1600,
      evaluationTasks: 16,
      evaluationEvery: 8,
      seed: 1,
      threads: 2,
    })
    assert.deepEqual(c.model, {
      kind: 'imported',
      folder: '/models/smollm2',
      maxPositions: 2048,
      lora: {
        rank: 16,
        alpha: 32,
        dropout: 0,
        targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
      },
    })
    assert.equal(c.prompt.compact, true)
    assert.equal(c.warmstart?.expertThoughts, true)
    assert.equal(c.warmstart?.keepBest, true)
    assert.deepEqual(c.stage1.annotator, { kind: 'oracle' })
    assert.equal(c.stage1.actingData, 'demonstrations')
    assert.equal(c.engine.recomputeLayers, true)
    assert.equal(c.evaluation.split, 'validation')
  })
})
