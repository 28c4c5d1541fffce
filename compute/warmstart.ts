// Warm-start (docs/design.md §7): behaviour cloning on expert demonstrations with injected mistakes (random
// executed actions labelled with the expert's, plus label noise), and learning to read a skill from
// demonstrations whose prompt carries the oracle skill of the expert's own solution. The built-in model has no
// instruction following and starts here from random weights and a tokenizer trained on the demonstrations; an
// imported model too weak to act (a small instruct model that never succeeds gives GRPO nothing to work with)
// starts from its own weights, tokenizer and chat template, training LoRA adapters when the run has them
// (`startingPolicy`, the one place where the two differ). Training stops early once validation success reaches
// the target, so that RL starts from a clearly imperfect policy (docs/benchmarks.md §8).
import type { Engine } from '../engine/index.ts'
import type { PlayedEnv } from '../envs/played.ts'
import { mixSeed, mulberry32 } from '../envs/rng.ts'
import type { Trajectory } from '../envs/types.ts'
import { trainByteLevelBpe } from '../policy/bpe-trainer.ts'
import type { Checkpoint } from '../policy/checkpoint.ts'
import type { ModelConfig } from '../policy/config.ts'
import { initWeights } from '../policy/init.ts'
import { parameterSpecs } from '../policy/parameters.ts'
import { TextTokenizer, TINY_SPECIAL_TOKENS } from '../policy/tokenizer.ts'
import type {
  BuiltinModelConfig,
  EngineSettingsConfig,
  EvaluationConfig,
  LoraSettings,
  PromptSettings,
  RunConfig,
  RunEnvSpec,
  WarmstartConfig,
} from '../seed/config.ts'
import { type AnalyzerEpisode, analyzerPrompt, episodeOutcome, episodeSkillBlock } from '../seed/index.ts'
import { oracleAnswer } from './analyze.ts'
import { readDemonstrationsFile } from './demonstrations-file.ts'
import { environmentOf } from './environment.ts'
import { evaluate } from './evaluate.ts'
import { CorePhaseError, LORA_SEED, loadPolicy, type Policy, toCheckpoint, withLora } from './policy.ts'
import { analyzerObservation, fitAnalyzer, fitPrompt, stepBudget, stepPromptText } from './prompts.ts'
import { type ExamplePool, type PoolLoss, type SupervisedExample, supervisedTrain } from './supervised.ts'

/**
 * The model a warm-start clones into: the built-in one (its shape; tokenizer and weights are made here), or an
 * imported checkpoint (`seedflow import`'s folder as read by the import code), with LoRA adapters trained on
 * its frozen weights when `lora` is set (as Stage 1 and Stage 2 do; they go on training the same adapters).
 */
export type WarmstartModel = BuiltinModelConfig | ImportedWarmstartModel

export interface ImportedWarmstartModel {
  kind: 'imported'
  base: Checkpoint
  lora?: LoraSettings
}

export interface WarmstartInput {
  env: RunEnvSpec
  model: WarmstartModel
  prompt: PromptSettings
  warmstart: WarmstartConfig
  /** Early-stopping evaluations use its temperature and step cap, on the validation split. */
  evaluation: Pick<EvaluationConfig, 'temperature' | 'maxEnvSteps'>
  seed: number
  /** The analyzer's prompt and answer budget, for the analyzer demonstrations (`warmstart.analyzerShare`). */
  analyzer?: { maxPromptTokens: number; maxAnswerTokens: number }
  /** Told each validation check as it happens (progress for heartbeats and scripts). */
  onCheck?: (check: { step: number; successRate: number; seconds: number }) => void
  /** Told after each training step with its loss (progress for heartbeats). */
  onStep?: (step: number, loss: number) => void
  /** Told after each demonstration episode is recorded (a remote environment's take minutes). */
  onDemonstration?: (episodes: number, of: number) => void
  /** The run's graph layout (`engine`: recomputeLayers, decodeWeights); default ENGINE_DEFAULTS. */
  engineSettings?: EngineSettingsConfig
}

/**
 * A run config's warm-start input, all but the model (the built-in model's settings, or an imported folder that
 * the warm-start phase reads): what the phase passes, and a script that warm-starts a config in process.
 */
export function warmstartSettings(c: RunConfig, warmstart: WarmstartConfig) {
  return {
    env: c.env,
    prompt: c.prompt,
    warmstart,
    analyzer: c.stage2.analyzer,
    evaluation: c.evaluation,
    engineSettings: c.engine,
    seed: c.seed,
  } satisfies Omit<WarmstartInput, 'model'>
}

export interface WarmstartStats {
  vocabSize: number
  parameters: number
  /** The parameters the warm-start trains: every weight, or the LoRA adapters' (an imported model with model.lora). */
  trainedParameters: number
  demoEpisodes: number
  /** (prompt → action) pairs: plain, and with the oracle skill in the prompt. */
  plainPairs: number
  skillPairs: number
  /** (analyzer prompt → oracle JSON) pairs, one per demonstration episode; 0 when `analyzerShare` is 0. */
  analyzerPairs: number
  steps: number
  firstLoss: number
  lastLoss: number
  /** The same per pool of examples (plain and skill-reading acting pairs, analyzer pairs). */
  pools: PoolLoss[]
  /** Steps at full frame weight after behaviour cloning, and their last loss. */
  polishSteps: number
  polishLoss: number | null
  stoppedEarly: boolean
  /** Validation success at each check. */
  checks: Array<{ step: number; successRate: number }>
  /** The step whose weights the checkpoint carries (before the polish): the last, or the best check's (keepBest). */
  keptStep: number
  /**
   * With checks and a polish: validation results just before and just after the polish, on four times the
   * checks' tasks (theirs first) with one sampling seed of its own, so the kept check's figure can be told apart
   * from its luck (it is the best of several noisy checks) and from what the polish changes. null otherwise.
   */
  polishCheck: { before: PolishCheck; after: PolishCheck } | null
  seconds: number
}

export interface PolishCheck {
  success: number
  score: number
  /** The share of malformed responses (what the polish is for). */
  invalidRate: number
  meanLength: number
}

export interface WarmstartResult {
  checkpoint: Checkpoint
  stats: WarmstartStats
}

export interface Demo {
  prompt: string
  /** The action taught (for a file's demonstration: its response). */
  action: string
  /** The response as given (a file's demonstration), instead of the action in the environment's format. */
  response?: string
  /** The expert's thought, written inside `<think>…</think>` before the action ('' or absent: none). */
  thought?: string
  /** The skill block the prompt carries (inserted when the prompt is fitted). */
  block?: string
}

/** The analyzer's view of a demonstration episode and the oracle's JSON answer to it. */
export interface AnalyzerDemo {
  episode: AnalyzerEpisode
  answer: string
}

/**
 * One demonstration episode; with `skill`, a solution whose prompt carries its oracle skill: the expert's own, or
 * with `warmstart.skillDetours`, one that takes a random action instead of the expert's at that share of its steps.
 */
async function demoEpisode(
  env: PlayedEnv,
  seed: number,
  settings: WarmstartConfig,
  prompt: PromptSettings,
  rng: ReturnType<typeof mulberry32>,
  withSkill: boolean,
  /** `warmstart.skillBlind`'s draw for a skill step (its own random stream): also show this step blind. */
  blind: () => boolean,
): Promise<{ demos: Demo[]; texts: string[]; analysis: AnalyzerDemo }> {
  const task = env.task('train', seed)
  const texts: string[] = []
  const episode = await env.open(task)
  const demos: Demo[] = []
  let trajectory: Trajectory
  try {
    while (!episode.done) {
      const text = stepPromptText(await episode.prompt({ compact: prompt.compact }), prompt)
      const move = await episode.expert()
      if (!move) throw new CorePhaseError(`${env.name} has no expert: the warm-start clones its demonstrations`)
      // a detour is its skill's move, not the expert's: its label and what it executes
      const detour = withSkill && rng.next() < (settings.skillDetours ?? 0) ? await episode.randomAction(rng) : null
      const label =
        detour ?? (!withSkill && rng.next() < settings.labelNoise ? await episode.randomAction(rng) : move.action)
      const thought = settings.expertThoughts && !detour ? move.thought : ''
      demos.push({ prompt: text, action: label, ...(thought ? { thought } : {}) })
      if (withSkill && blind()) {
        const unseen = stepPromptText(await episode.prompt({ compact: prompt.compact, blind: true }), prompt)
        demos.push({ prompt: unseen, action: label })
      }
      const executed =
        detour ?? (!withSkill && rng.next() < settings.mistakeRate ? await episode.randomAction(rng) : move.action)
      await episode.step(env.formatResponse(executed))
    }
    trajectory = await episode.trajectory()
  } finally {
    await episode.close()
  }
  const oracle = (await env.oracle(trajectory)).output
  const analysis: AnalyzerDemo = {
    episode: {
      task: trajectory.taskText,
      outcome: episodeOutcome(trajectory.totalReward),
      steps: trajectory.steps.map((s) => ({
        observation: analyzerObservation(s.observation, prompt),
        response: s.response,
        valid: s.valid,
      })),
    },
    answer: oracleAnswer(oracle),
  }
  // the analyzer's texts, so the tokenizer covers Stage 1's prompts and answers
  texts.push(analyzerPrompt(analysis.episode), analysis.answer)
  if (!withSkill) return { demos, texts, analysis }
  if (!trajectory.info.won) return { demos: [], texts, analysis }
  const block = episodeSkillBlock(oracle.episode_skill)
  return { demos: demos.map((d) => ({ ...d, block })), texts, analysis }
}

/**
 * Loss weights for demonstrated responses: `frameWeight` on the tokens every response shares (the longest
 * common prefix and suffix of their token ids, e.g. `<think></think><action>` and `</action>`), 1 on the rest.
 * With fewer than two distinct responses nothing is a frame.
 */
export function frameWeights(responses: readonly number[][], frameWeight: number): (response: number[]) => number[] {
  if (responses.length < 2) return (response) => response.map(() => 1)
  const shortest = Math.min(...responses.map((r) => r.length))
  const shared = (at: (r: number[], i: number) => number | undefined) => {
    let n = 0
    while (n < shortest && responses.every((r) => at(r, n) === at(responses[0]!, n))) n++
    return n
  }
  const prefix = shared((r, i) => r[i])
  const suffix = Math.min(
    shared((r, i) => r[r.length - 1 - i]),
    shortest - prefix,
  )
  return (response) => response.map((_, i) => (i < prefix || i >= response.length - suffix ? frameWeight : 1))
}

/** The response a demonstration teaches: its thought (if any) and action in the environment's format. */
export function demoResponse(env: Pick<PlayedEnv, 'formatResponse'>, d: Demo): string {
  return d.response ?? env.formatResponse(d.action, d.thought)
}

/** The warm-start's demonstrations: acting pairs (plain and with the oracle skill), analyzer pairs, and texts. */
export interface Demonstrations {
  plain: Demo[]
  skilled: Demo[]
  analyses: AnalyzerDemo[]
  /** Every text the model will read or write, for the tokenizer. */
  corpus: string[]
}

/**
 * The demonstrations of a warm-start; deterministic, so Stage 1 can replay exactly what the warm-start trained on
 * (a remote environment's: as long as the server gives the same episodes).
 */
export async function demonstrations(
  envName: RunEnvSpec,
  ws: WarmstartConfig,
  prompt: PromptSettings,
  seed: number,
  onProgress?: (episodes: number, of: number) => void,
): Promise<Demonstrations> {
  const env = environmentOf(envName)
  if (ws.demonstrationsFile !== undefined) {
    const { demos } = await readDemonstrationsFile(ws.demonstrationsFile)
    const plain = demos.map((d) => ({
      prompt: stepPromptText(d.prompt, prompt),
      action: d.response,
      response: d.response,
    }))
    onProgress?.(plain.length, plain.length)
    return {
      plain,
      skilled: [],
      analyses: [],
      corpus: [...plain.map((d) => d.prompt), ...new Set(demos.map((d) => d.response))],
    }
  }
  const rng = mulberry32(mixSeed(seed, 0x5741))
  // a stream of its own, so that absent or 0 leaves every other draw as it was
  const blindRng = mulberry32(mixSeed(seed, 0x424c))
  const blindShare = ws.skillBlind ?? 0
  const blind = () => blindRng.next() < blindShare
  const plain: Demo[] = []
  const skilled: Demo[] = []
  const analyses: AnalyzerDemo[] = []
  const corpus: string[] = []
  for (let i = 0; i < ws.demoTasks; i++) {
    const withSkill = rng.next() < ws.skillDemoShare
    // with detours a skill task is played twice from its first state: two skills that demand different moves
    const plays = withSkill && (ws.skillDetours ?? 0) > 0 ? 2 : 1
    for (let play = 0; play < plays; play++) {
      const episode = await demoEpisode(env, mixSeed(seed, i) % 2 ** 16, ws, prompt, rng, withSkill, blind)
      ;(withSkill ? skilled : plain).push(...episode.demos)
      analyses.push(episode.analysis)
      corpus.push(...episode.texts)
    }
    onProgress?.(i + 1, ws.demoTasks)
  }
  for (const d of plain) corpus.push(d.prompt)
  for (const d of skilled) corpus.push(d.prompt, d.block ?? '')
  corpus.push(...new Set([...plain, ...skilled].map((d) => demoResponse(env, d))))
  return { plain, skilled, analyses, corpus }
}

/**
 * Per-action weights that balance the kinds of action (an action's first word: `go`, `take`, `up`, …): each
 * example weighs (its kind's frequency)^−`balance`, scaled to a mean of 1 over the demonstrations. 0: all 1.
 */
export function actionBalanceWeights(actions: readonly string[], balance: number): (action: string) => number {
  if (balance === 0 || actions.length === 0) return () => 1
  const kind = (a: string) => a.split(' ')[0] as string
  const counts = new Map<string, number>()
  for (const a of actions) counts.set(kind(a), (counts.get(kind(a)) ?? 0) + 1)
  const raw = (a: string) => ((counts.get(kind(a)) ?? 1) / actions.length) ** -balance
  const mean = actions.reduce((sum, a) => sum + raw(a), 0) / actions.length
  return (a) => raw(a) / mean
}

/**
 * The acting demonstrations as weighted supervised pools (`plain`, `skill`), sharing `share` by their sizes: the
 * frame every response shares weighs `formatTokenWeight`, and each example is scaled by its action kind's
 * balance weight (or every token weighs 1 with `frame: 'full'`).
 */
export async function actingPools(
  policy: Policy,
  demos: Pick<Demonstrations, 'plain' | 'skilled'>,
  envName: RunEnvSpec,
  prompt: PromptSettings,
  weighting: Pick<WarmstartConfig, 'formatTokenWeight' | 'actionBalance'>,
  share: number,
): Promise<(frame: 'weighted' | 'full') => ExamplePool[]> {
  const env = environmentOf(envName)
  const budget = stepBudget(prompt, policy.model.config.maxPositions)
  const all = [...demos.plain, ...demos.skilled]
  const labels = all.map((d) => d.action)
  const texts = new Set(all.map((d) => demoResponse(env, d)))
  const responseIds = new Map([...texts].map((t) => [t, policy.codec.responseIds(t)]))
  const weights = frameWeights([...responseIds.values()], weighting.formatTokenWeight)
  const balance = actionBalanceWeights(labels, weighting.actionBalance)
  const toExample = (d: Demo): SupervisedExample => {
    const fit = fitPrompt(policy.codec, d.prompt, budget, d.block)
    const response = responseIds.get(demoResponse(env, d))!
    const scale = balance(d.action)
    return { context: fit.ids, response, weights: weights(response).map((w) => w * scale) }
  }
  const plain = await mapYielding(demos.plain, toExample)
  const skill = await mapYielding(demos.skilled, toExample)
  const total = Math.max(1, plain.length + skill.length)
  return (frame) =>
    [
      { name: 'plain', examples: plain, share: (share * plain.length) / total },
      { name: 'skill', examples: skill, share: (share * skill.length) / total },
    ].map((p) => ({
      ...p,
      examples: frame === 'full' ? p.examples.map(({ weights: _w, ...e }) => e) : p.examples,
    }))
}

/**
 * The policy a warm-start trains, the one place where the model kinds differ: the built-in model gets a
 * byte-level BPE trained on the demonstrations' texts (`corpus`) and seeded random weights; an imported model is
 * its checkpoint as it is (its tokenizer and chat template make the prompts), with fresh LoRA adapters (seeded
 * as Stage 1's) when the run has them.
 */
export async function startingPolicy(
  engine: Engine,
  model: WarmstartModel,
  corpus: readonly string[],
  seed: number,
  settings?: EngineSettingsConfig,
): Promise<Policy> {
  const options = settings ? { settings } : {}
  if (model.kind === 'imported') {
    const policy = loadPolicy(engine, model.base, options)
    if (model.lora) await withLora(policy, model.lora, mixSeed(seed, LORA_SEED))
    return policy
  }
  const tokenizerJson = trainByteLevelBpe([...corpus], {
    vocabSize: model.vocabSize,
    specialTokens: [...TINY_SPECIAL_TOKENS],
  })
  const tokenizer = new TextTokenizer(tokenizerJson)
  const config: ModelConfig = {
    family: 'llama',
    vocabSize: tokenizer.vocabSize,
    hiddenSize: model.hiddenSize,
    intermediateSize: model.intermediateSize,
    numLayers: model.numLayers,
    numHeads: model.numHeads,
    numKvHeads: model.numKvHeads,
    headDim: model.headDim,
    rmsNormEps: 1e-5,
    ropeTheta: 10000,
    maxPositions: model.maxPositions,
    qkvBias: false,
    tieEmbeddings: true,
    ...(model.learnedPositions ? { learnedPositions: true } : {}),
  }
  const checkpoint: Checkpoint = {
    config,
    weights: initWeights(config, mulberry32(mixSeed(seed, 0x1417))),
    tokenizerJson,
    eosIds: [...tokenizer.eosIds],
  }
  return loadPolicy(engine, checkpoint, options)
}

/** Makes (or loads) the model, then behaviour-clones; returns the warm-start checkpoint. */
export async function warmstart(engine: Engine, input: WarmstartInput): Promise<WarmstartResult> {
  const started = performance.now()
  const ws = input.warmstart
  const { plain, skilled, analyses, corpus } = await demonstrations(
    input.env,
    ws,
    input.prompt,
    input.seed,
    input.onDemonstration,
  )
  const policy = await startingPolicy(engine, input.model, corpus, input.seed, input.engineSettings)
  const acting = await actingPools(policy, { plain, skilled }, input.env, input.prompt, ws, 1 - ws.analyzerShare)
  const analyzerExamples =
    ws.analyzerShare > 0 ? await analyzerPairs(policy, analyses, input.analyzer, input.prompt.truncation) : []
  const analyzerPool = {
    name: 'analyzer',
    examples: analyzerExamples,
    share: ws.analyzerShare,
    batchSize: ws.analyzerBatchSize,
  }
  const pools = (frame: 'weighted' | 'full') => [...acting(frame), analyzerPool]
  const checks: Array<{ step: number; successRate: number }> = []
  // the best check so far (keepBest); a holder, since the check callback sets it
  // the trained tensors: every weight, or the LoRA adapters
  const kept: { best: { step: number; successRate: number; weights: Map<string, Float32Array> } | null } = {
    best: null,
  }
  const result = await supervisedTrain(policy, pools('weighted'), {
    steps: ws.steps,
    batchSize: ws.batchSize,
    lr: ws.lr,
    warmupSteps: ws.warmupSteps,
    seed: mixSeed(input.seed, 0xbc),
    checkEvery: ws.evalEvery,
    ...(input.onStep ? { onStep: input.onStep } : {}),
    check: async (step) => {
      const r = (await validation(policy, input, step)).successRate
      checks.push({ step, successRate: r })
      if (ws.keepBest && (kept.best === null || r >= kept.best.successRate)) {
        kept.best = { step, successRate: r, weights: await policy.trainer.trained() }
      }
      input.onCheck?.({ step, successRate: r, seconds: (performance.now() - started) / 1000 })
      return r >= ws.targetSuccess
    },
  })
  const best = kept.best
  if (best !== null && best.step !== result.steps) {
    await policy.trainer.setTrained(best.weights)
  }
  const keptStep = best?.step ?? result.steps
  const checked = ws.evalEvery > 0 && ws.framePolishSteps > 0
  const before = checked ? await polishCheck(policy, input) : null
  // the frame, learned at a small weight, is not yet reliable at temperature 1 (rollouts sampled 40% malformed
  // responses); a short pass at full weight and a lower rate fixes it
  const polish =
    ws.framePolishSteps > 0
      ? await supervisedTrain(policy, pools('full'), {
          steps: ws.framePolishSteps,
          batchSize: ws.batchSize,
          lr: ws.lr * 0.3,
          warmupSteps: 0,
          seed: mixSeed(input.seed, 0xbd),
        })
      : null
  const after = checked ? await polishCheck(policy, input) : null
  const checkpoint = await toCheckpoint(policy)
  await policy.trainer.release()
  const count = (specs: ReadonlyArray<{ shape: readonly number[] }>) =>
    specs.reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0)
  return {
    checkpoint,
    stats: {
      vocabSize: policy.model.config.vocabSize,
      parameters: count(parameterSpecs(policy.model.config)),
      trainedParameters: count(policy.trainer.trainedSpecs()),
      demoEpisodes: ws.demoTasks,
      plainPairs: plain.length,
      skillPairs: skilled.length,
      analyzerPairs: analyzerExamples.length,
      steps: result.steps,
      firstLoss: result.firstLoss,
      lastLoss: result.lastLoss,
      pools: result.pools,
      polishSteps: polish?.steps ?? 0,
      polishLoss: polish?.lastLoss ?? null,
      stoppedEarly: result.stoppedEarly,
      checks,
      keptStep,
      polishCheck: before !== null && after !== null ? { before, after } : null,
      seconds: (performance.now() - started) / 1000,
    },
  }
}

/** (analyzer prompt → oracle JSON) pairs, prompts fitted to the analyzer budget as Stage 1's are. */
function analyzerPairs(
  policy: Policy,
  analyses: readonly AnalyzerDemo[],
  budget: WarmstartInput['analyzer'],
  truncation: PromptSettings['truncation'],
): Promise<SupervisedExample[]> {
  if (!budget) throw new CorePhaseError('warmstart.analyzerShare > 0 needs the analyzer budget (stage2.analyzer)')
  const fitted = {
    maxPromptTokens: budget.maxPromptTokens,
    responseTokens: budget.maxAnswerTokens,
    contextLength: policy.model.config.maxPositions,
    truncation,
  }
  return mapYielding(analyses, (a) => ({
    context: fitAnalyzer(policy.codec, a.episode, fitted).ids,
    response: policy.codec.responseIds(a.answer),
  }))
}

/**
 * `items.map(fn)`, giving the event loop a turn every `every` items: tens of thousands of prompts take a minute to
 * fit, which would otherwise hold back the activity's heartbeats and the worker's workflow tasks.
 */
async function mapYielding<T, U>(items: readonly T[], fn: (item: T) => U, every = 500): Promise<U[]> {
  const out: U[] = []
  for (let i = 0; i < items.length; i++) {
    if (i > 0 && i % every === 0) await new Promise<void>((resolve) => setImmediate(resolve))
    out.push(fn(items[i] as T))
  }
  return out
}

/** The first `tasks` validation tasks (the checks': evalTasks), sampled with the stream of (seed, step). */
function validation(policy: Policy, input: WarmstartInput, step: number, tasks = input.warmstart.evalTasks) {
  return evaluate(policy, {
    env: input.env,
    split: 'validation',
    seedStart: 0,
    tasks,
    temperature: input.evaluation.temperature,
    maxEnvSteps: input.evaluation.maxEnvSteps,
    prompt: input.prompt,
    seed: mixSeed(input.seed, 0xe7a1, step),
  })
}

/**
 * The before/after-polish evaluation: 4 × the checks' tasks (one check's standard error halved), with the sampling
 * stream of step 0, which no check has (checks are at steps ≥ 1).
 */
export async function polishCheck(policy: Policy, input: WarmstartInput): Promise<PolishCheck> {
  const r = await validation(policy, input, 0, 4 * input.warmstart.evalTasks)
  return { success: r.successRate, score: r.meanScore, invalidRate: r.invalidRate, meanLength: r.meanLength }
}
