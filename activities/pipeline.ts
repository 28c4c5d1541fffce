// The pipeline activities (DESIGN.md section 3): each phase reads its inputs from the artifact store, runs the
// training core on the worker's engine, writes its outputs and returns keys and small statistics. Every phase
// goes through runPhase, so a retried or re-run phase with the same config and inputs is reused, not recomputed.
import { AsyncLocalStorage } from 'node:async_hooks'
import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { stat } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { pipeline as streamPipeline } from 'node:stream/promises'
import { Context } from '@temporalio/activity'
import { ApplicationFailure } from '@temporalio/common'
import type { AdamWState, Engine } from '../engine/index.ts'
import { mixSeed, mulberry32 } from '../envs/rng.ts'
import { huggingFaceFolderFiles, importHuggingFaceFolder } from '../policy/hf-import.ts'
import { ALGORITHMS, type AlgorithmRow, needsLibrary } from '../seed/algorithms.ts'
import { type BuiltinModelConfig, type ImportedModelConfig, parseRunConfig, type RunConfig } from '../seed/config.ts'
import type { HyperparameterOverrides } from '../seed/hyperparameters.ts'
import { episodeSkillBlock } from '../seed/index.ts'
import type { ArtifactStore, ObjectInfo } from '../store/artifact-store.ts'
import { getExpected, getJson, putJson } from '../store/json.ts'
import { CHECKPOINT_FILES, type CheckpointFile, keys } from '../store/keys.ts'
import { loadCheckpoint, saveCheckpoint } from './checkpoint-store.ts'
import {
  analyze,
  annotateStage1,
  checkpointCodec,
  evaluate,
  evaluationSeed,
  evaluationSkills,
  loadPolicy,
  type Policy,
  type RescoreStats,
  type RolloutTrajectory,
  rawHindsightBlocks,
  rescore,
  rollout,
  type SkillRecord,
  sampleTasks,
  toCheckpoint,
  trainStage1,
  update,
  warmstart,
} from './core/index.ts'
import { recordHyperparameters, runConfigOf } from './hyperparameters.ts'
import { recordIteration } from './iteration-record.ts'
import { decodeJsonlGz, encodeJsonlGz } from './jsonl.ts'
import { type PhaseCounters, type PhaseHooks, type PhaseResult, type PhaseScope, runPhase } from './phase.ts'
import type {
  CheckpointRef,
  PhaseSummary,
  PipelineActivities,
  RunPlan,
  RunRef,
  SnapshotInput,
} from './pipeline-types.ts'
import { type ArtifactRef, createRecordRunActivities, type RunRecord } from './record-run.ts'
import { decodeRescore, encodeRescore } from './rescore-format.ts'
import { applyRetention } from './retention.ts'
import { parseSkillLines, readSkillLibrary } from './skill-library.ts'

export interface PipelineDeps {
  store: ArtifactStore
  engine: Engine
  counters?: PhaseCounters
  /** Around every computed phase shard (the worker's fault injection). */
  phaseHooks?: PhaseHooks
  /** Episodes (tasks × samples) per rollout shard when planning a run; default 64. */
  episodesPerShard?: number
  /** Continue-as-new after this many iterations; default 5. */
  iterationsPerRun?: number
  /** Heartbeat timeout the planned run gives its model-bound activities (RunPlan); default: the workflows' 5 minutes. */
  heartbeatTimeoutSeconds?: number
}

/** What snapshot.json holds: the weights one iteration acts, scores and analyzes with. */
export interface Snapshot {
  version: 1
  run: RunRef
  iteration: number
  acting: CheckpointRef
  reference: CheckpointRef
  analyzer: CheckpointRef | null
}

const MODEL_FILE: CheckpointFile = 'model.safetensors'

/** Errors that no retry can fix: bad config, corrupt or missing artifacts, impossible inputs, diverged losses. */
const FATAL = new Set([
  'IntegrityError',
  'CheckpointError',
  'InvalidKeyError',
  'InvalidRunIdError',
  'RunConfigError',
  'CorePhaseError',
  'PromptBudgetError',
  'SeedInputError',
  'LossConfigError',
  'OptimizerError',
  'ShapeError',
  'GraphError',
  'SyntaxError',
  'RangeError',
  'NotFoundError',
  'NonFiniteLossError',
  'StoreAccessError',
])

/** The last progress details each running activity reported; every later heartbeat repeats them. */
const progressOf = new WeakMap<Context, PhaseProgress>()

/** What a long phase reports in its heartbeats (`seedflow run` and the Web UI show it). */
export interface PhaseProgress {
  phase: string
  step: number
  steps: number
  /** Validation success at the last check, where the phase checks it. */
  successRate?: number
}

/** Heartbeats when running as an activity (no-op in plain calls, e.g. unit tests). */
function heartbeat(progress?: PhaseProgress): void {
  let context: Context
  try {
    context = Context.current()
  } catch {
    return // not in an activity context
  }
  if (progress) progressOf.set(context, progress)
  context.heartbeat(progressOf.get(context))
}

function inActivityContext(): boolean {
  try {
    Context.current()
    return true
  } catch {
    return false
  }
}

function fatal(message: string, type: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(message, type)
}

/** Fatal errors whose failure type is what they mean to an operator, not their class name. */
const FAILURE_TYPE = new Map([
  ['SyntaxError', 'CorruptArtifact'],
  ['RescoreFormatError', 'CorruptArtifact'],
  ['LibraryMissingError', 'LibraryMissing'],
])

/** Every 10 s, or four times per heartbeat timeout when that is shorter (a short timeout must still be met). */
function heartbeatInterval(): number {
  const timeout = Context.current().info.heartbeatTimeoutMs
  return timeout ? Math.max(100, Math.min(10_000, Math.floor(timeout / 4))) : 10_000
}

/** Runs an activity body; deterministic failures become non-retryable ApplicationFailures named by type. */
/** The policies an activity loaded (policyOf), released when it ends: a worker lives for many activities. */
const activityPolicies = new AsyncLocalStorage<Policy[]>()

async function guarded<T>(what: string, body: () => Promise<T>): Promise<T> {
  const timer = inActivityContext() ? setInterval(heartbeat, heartbeatInterval()) : undefined
  const loaded: Policy[] = []
  try {
    return await activityPolicies.run(loaded, body)
  } catch (error) {
    if (error instanceof ApplicationFailure) throw error
    const e = error as Error
    if (FATAL.has(e?.name) || FAILURE_TYPE.has(e?.name)) {
      const type = FAILURE_TYPE.get(e.name) ?? e.name
      throw ApplicationFailure.create({ message: `${what}: ${e.message}`, type, nonRetryable: true, cause: e })
    }
    throw error
  } finally {
    if (timer) clearInterval(timer)
    await Promise.all(loaded.map((p) => p.model.release()))
  }
}

function refOf(info: ObjectInfo): ArtifactRef {
  return { key: info.key, sha256: info.sha256, bytes: info.bytes }
}

function summaryOf<S extends Record<string, number>>(result: PhaseResult<S>): PhaseSummary {
  return {
    manifestKey: result.manifestKey,
    reused: result.reused,
    outputs: Object.fromEntries(Object.entries(result.outputs).map(([name, info]) => [name, refOf(info)])),
    stats: result.stats,
  }
}

/** Only finite numbers survive into stats; a non-finite loss fails the phase for good. */
/** The rescore's teacher gaps as manifest statistics (a mean without samples is 0 with weight 0). */
function teacherGapStats(gap: RescoreStats['teacherGap']): Record<string, number> {
  return {
    teacherGapExpert: gap.expert ?? 0,
    teacherGapExpertSamples: gap.expertSamples,
    teacherGapOther: gap.other ?? 0,
    teacherGapOtherSamples: gap.otherSamples,
  }
}

function numericStats(values: Record<string, unknown>, lossNames: readonly string[] = []): Record<string, number> {
  const stats: Record<string, number> = {}
  for (const [name, value] of Object.entries(values)) {
    if (typeof value !== 'number') continue
    if (!Number.isFinite(value)) {
      if (lossNames.includes(name)) throw fatal(`${name} is ${value}`, 'NonFiniteLossError')
      continue
    }
    stats[name] = value
  }
  return stats
}

/** The key prefix of a checkpoint folder, from the key of its model file. */
function folderOf(modelKey: string): string {
  return modelKey.slice(0, -MODEL_FILE.length)
}

async function checkpointOutputs(store: ArtifactStore, ref: CheckpointRef): Promise<Record<string, ObjectInfo>> {
  const outputs: Record<string, ObjectInfo> = {}
  for (const file of CHECKPOINT_FILES) {
    const info = await store.head(`${ref.prefix}${file}`)
    if (info) outputs[file] = info
  }
  return outputs
}

function checkpointOf(outputs: Record<string, ObjectInfo>, what: string): CheckpointRef {
  const model = outputs[MODEL_FILE]
  if (!model) throw fatal(`${what}: the manifest records no ${MODEL_FILE}`, 'PhaseContractError')
  return { prefix: folderOf(model.key), sha256: model.sha256 }
}

async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256')
  await streamPipeline(createReadStream(path), hash)
  return hash.digest('hex')
}

/**
 * The sha256 of every file an import of `folder` reads (by file name): the inputs of the import phase, so a
 * changed folder is a different input. A missing or unreadable folder or file fails for good, naming the path.
 */
async function folderHashes(folder: string): Promise<Record<string, string>> {
  const unreadable = (path: string, error: unknown) =>
    fatal(`model.folder ${folder}: cannot read ${path} (${(error as Error).message})`, 'ModelImportError')
  try {
    if (!(await stat(folder)).isDirectory())
      throw fatal(
        `model.folder ${folder} is not a folder (it needs config.json, model.safetensors, tokenizer.json)`,
        'ModelImportError',
      )
  } catch (error) {
    if (error instanceof ApplicationFailure) throw error
    throw unreadable(folder, error)
  }
  let files: string[]
  try {
    files = await huggingFaceFolderFiles(folder)
  } catch (error) {
    throw unreadable(join(folder, 'model.safetensors.index.json'), error)
  }
  const hashes: Record<string, string> = {}
  for (const file of files) {
    const path = join(folder, file)
    try {
      hashes[`folder/${file}`] = await sha256File(path)
    } catch (error) {
      throw unreadable(path, error)
    }
  }
  return hashes
}

/** The root seed of Stage 1's rollouts and SFT (shared by `annotate`, so both write the same library). */
function oracleAnnotator(config: RunConfig): void {
  const kind = config.stage1.annotator.kind
  if (kind !== 'oracle') throw fatal(`stage1.annotator.kind ${kind} is not implemented; use oracle`, 'InvalidRunConfig')
}

export function createPipelineActivities(deps: PipelineDeps): PipelineActivities {
  const { store, engine } = deps
  const phaseDeps = {
    store,
    ...(deps.counters ? { counters: deps.counters } : {}),
    ...(deps.phaseHooks ? { hooks: deps.phaseHooks } : {}),
  }
  const { recordRun } = createRecordRunActivities({ store })
  const configs = new Map<string, { config: RunConfig; overrides: HyperparameterOverrides | null }>()

  /**
   * The config the workflow's hash names: the run record's, or an effective config after hyperparameter changes
   * (activities/hyperparameters.ts), checked against the hash, with the overrides that made it.
   */
  async function effectiveOf(run: RunRef) {
    const cached = configs.get(`${run.runId}/${run.configSha256}`)
    if (cached) return cached
    const { config, overrides } = await runConfigOf(store, run)
    const parsed = parseRunConfig(config)
    if (!parsed.ok) throw fatal(`run ${run.runId}: ${parsed.problems.join('; ')}`, 'InvalidRunConfig')
    const entry = { config: parsed.config, overrides }
    configs.set(`${run.runId}/${run.configSha256}`, entry)
    return entry
  }

  async function configOf(run: RunRef): Promise<RunConfig> {
    return (await effectiveOf(run)).config
  }

  /** A phase's spec: the config hash, its inputs and, after hyperparameter changes, the overrides in effect. */
  async function specOf(run: RunRef, inputs: Record<string, string>) {
    const { overrides } = await effectiveOf(run)
    return { configSha256: run.configSha256, inputs, ...(overrides ? { hyperparameters: overrides } : {}) }
  }

  async function planOf(run: RunRef): Promise<RunPlan> {
    return (await getJson(store, keys.runPlan(run.runId))) as RunPlan
  }

  async function policyOf(ref: CheckpointRef): Promise<{ policy: Policy; optimizer?: AdamWState }> {
    const { checkpoint, optimizer } = await loadCheckpoint(store, ref)
    const sha = (await store.head(`${ref.prefix}${MODEL_FILE}`))?.sha256
    if (sha !== ref.sha256) {
      throw fatal(`checkpoint ${ref.prefix}: model sha256 ${sha} is not the expected ${ref.sha256}`, 'IntegrityError')
    }
    const policy = loadPolicy(engine, checkpoint)
    activityPolicies.getStore()?.push(policy)
    return { policy, ...(optimizer ? { optimizer } : {}) }
  }

  async function snapshotOf(ref: ArtifactRef): Promise<Snapshot> {
    const snapshot = (await getJson(store, ref.key, ref.sha256)) as Snapshot
    if (snapshot?.version !== 1 || !snapshot.acting) throw fatal(`${ref.key} is not a snapshot`, 'CorruptArtifact')
    return snapshot
  }

  async function trajectoriesOf(ref: ArtifactRef): Promise<RolloutTrajectory[]> {
    return decodeJsonlGz(await getExpected(store, ref.key, ref.sha256), ref.key) as RolloutTrajectory[]
  }

  async function skillsOf(ref: ArtifactRef): Promise<SkillRecord[]> {
    return parseSkillLines((await getExpected(store, ref.key, ref.sha256)).toString('utf8'), ref.key)
  }

  /** The Stage 1 skills (parsed annotations), for rows that read the library. */
  function libraryOf(run: RunRef, algorithm: string): Promise<{ skills: string[]; sha256: string }> {
    return readSkillLibrary(store, run.runId, algorithm)
  }

  /** Seeded uniform retrieval from the library, as runIteration does it. */
  function picker(library: readonly string[], seed: number): () => string {
    const rng = mulberry32(seed)
    return () => library[Math.floor(rng.next() * library.length)] as string
  }

  function iterationSeed(config: RunConfig, iteration: number): number {
    return mixSeed(config.seed, 0x5eed, iteration)
  }

  /** Tasks of one rollout shard: the iteration's B tasks, every `shards`-th from `shard` (groups stay whole). */
  function shardTasks(config: RunConfig, iteration: number, shard: number, shards: number) {
    const tasks = sampleTasks(
      config.env,
      'train',
      config.stage2.tasksPerStep,
      mixSeed(iterationSeed(config, iteration), 1),
    )
    return tasks.map((task, index) => ({ task, index })).filter((t) => t.index % shards === shard)
  }

  /** The built-in model's base checkpoint: the warm-start (behaviour cloning from scratch). */
  async function warmstartBase(run: RunRef, config: RunConfig, model: BuiltinModelConfig) {
    const settings = config.warmstart
    if (!settings) throw fatal('warmstart: the built-in model needs warm-start settings', 'InvalidRunConfig')
    return runPhase(phaseDeps, scope(run, 'warmstart', 0), await specOf(run, {}), async (ctx) => {
      const r = await warmstart(engine, {
        env: config.env,
        model,
        prompt: config.prompt,
        warmstart: settings,
        analyzer: config.stage2.analyzer,
        evaluation: config.evaluation,
        seed: config.seed,
        onCheck: (check) =>
          heartbeat({ phase: 'warmstart', step: check.step, steps: settings.steps, successRate: check.successRate }),
      })
      const stats = numericStats(r.stats as unknown as Record<string, unknown>, ['lastLoss'])
      const prefix = folderOf(keys.baseCheckpoint(run.runId, MODEL_FILE, ctx.attempt))
      const ref = await saveCheckpoint(store, prefix, r.checkpoint)
      return { outputs: await checkpointOutputs(store, ref), stats }
    })
  }

  /**
   * An imported model's base checkpoint: the Hugging Face folder read on this worker and stored as the run's
   * base (float32 weights, config, tokenizer and tokenizer_config.json with the chat template). The folder's
   * file hashes are the phase's inputs. No warm-start: the model starts from its own weights.
   */
  async function importBase(run: RunRef, model: ImportedModelConfig) {
    const folder = resolve(model.folder)
    return runPhase(phaseDeps, scope(run, 'import', 0), await specOf(run, await folderHashes(folder)), async (ctx) => {
      let imported: Awaited<ReturnType<typeof importHuggingFaceFolder>>
      try {
        imported = await importHuggingFaceFolder(folder)
        checkpointCodec(imported.checkpoint) // every phase needs prompts: no chat template and no ChatML tokens fails here
      } catch (error) {
        throw fatal(`model.folder ${folder}: ${(error as Error).message}`, 'ModelImportError')
      }
      const c = imported.checkpoint.config
      if (model.maxPositions > c.maxPositions) {
        throw fatal(
          `model.maxPositions: ${model.maxPositions} exceeds the max_position_embeddings ${c.maxPositions} of ${join(folder, 'config.json')}`,
          'InvalidRunConfig',
        )
      }
      const prefix = folderOf(keys.baseCheckpoint(run.runId, MODEL_FILE, ctx.attempt))
      const ref = await saveCheckpoint(store, prefix, imported.checkpoint)
      const parameters = [...imported.checkpoint.weights.values()].reduce((n, w) => n + w.length, 0)
      return {
        outputs: await checkpointOutputs(store, ref),
        stats: { parameters, vocabSize: c.vocabSize, maxPositions: c.maxPositions },
      }
    })
  }

  /**
   * The annotation of Stage 1 (before its SFT) and of the `annotate` phase of library rows that skip Stage 1:
   * the base policy rolls out Stage 1's train tasks and the environment's oracle annotates every trajectory.
   * Writes the Stage 1 trajectories and the annotations (the skill library).
   */
  async function annotateBase(run: RunRef, config: RunConfig, policy: Policy, attempt: number) {
    const annotated = await annotateStage1(policy, config)
    heartbeat()
    const trajectories = await store.put(
      keys.sftTrajectories(run.runId, 0, attempt),
      encodeJsonlGz(annotated.trajectories),
    )
    const annotations = await store.put(
      keys.sftAnnotations(run.runId, attempt),
      Buffer.from(annotated.skills.map((s) => `${JSON.stringify(s)}\n`).join(''), 'utf8'),
    )
    return {
      trajectories: annotated.trajectories,
      skills: annotated.skills,
      outputs: { trajectories, annotations },
      stats: { rolloutSuccess: annotated.rollout.successRate, annotated: annotated.skills.filter((s) => s.ok).length },
    }
  }

  const scope = (run: RunRef, phase: PhaseScope['phase'], shard: number, iteration?: number): PhaseScope => ({
    runId: run.runId,
    phase,
    shard,
    ...(iteration === undefined ? {} : { iteration }),
  })

  return {
    async planRun({ runId, config }) {
      return guarded('planRun', async () => {
        const parsed = parseRunConfig(config)
        if (!parsed.ok) {
          throw fatal(`invalid run config:\n${parsed.problems.join('\n')}`, 'InvalidRunConfig')
        }
        const c = parsed.config
        const record = await recordRun({ runId, config: config as Record<string, unknown> })
        const recorded = (await getJson(store, record.key)) as RunRecord
        const run: RunRef = { runId, configSha256: recorded.configSha256 }
        const episodes = c.stage2.tasksPerStep * c.stage2.groupSize
        const plan: RunPlan = {
          algorithm: c.algorithm,
          env: c.env,
          iterations: c.stage2.iterations,
          shards: Math.max(1, Math.min(c.stage2.tasksPerStep, Math.ceil(episodes / (deps.episodesPerShard ?? 64)))),
          evalEvery: c.evaluation.every > 0 ? c.evaluation.every : Math.max(1, c.stage2.iterations),
          iterationsPerRun: deps.iterationsPerRun ?? 5,
          ...(deps.heartbeatTimeoutSeconds ? { heartbeatTimeoutSeconds: deps.heartbeatTimeoutSeconds } : {}),
        }
        // the plan is part of the run: a second planRun (continue-as-new never replans) keeps the first one
        const planKey = keys.runPlan(runId)
        if (await store.head(planKey)) {
          const existing = (await getJson(store, planKey)) as RunPlan
          return { run, plan: existing, record }
        }
        await putJson(store, planKey, plan)
        return { run, plan, record }
      })
    },

    async prepare({ run }) {
      return guarded('prepare', async () => {
        const config = await configOf(run)
        const result =
          config.model.kind === 'imported'
            ? await importBase(run, config.model)
            : await warmstartBase(run, config, config.model)
        return { ...summaryOf(result), checkpoint: checkpointOf(result.outputs, 'prepare') }
      })
    },

    async annotate({ run, base }) {
      return guarded('annotate', async () => {
        const config = await configOf(run)
        oracleAnnotator(config)
        const result = await runPhase(
          phaseDeps,
          scope(run, 'annotate', 0),
          await specOf(run, { base: base.sha256 }),
          async (ctx) => {
            const { policy } = await policyOf(base)
            const { outputs, stats } = await annotateBase(run, config, policy, ctx.attempt)
            return { outputs, stats }
          },
        )
        return summaryOf(result)
      })
    },

    async stage1({ run, base }) {
      return guarded('stage1', async () => {
        const config = await configOf(run)
        oracleAnnotator(config)
        const result = await runPhase(
          phaseDeps,
          scope(run, 'sft', 0),
          await specOf(run, { base: base.sha256 }),
          async (ctx) => {
            const { policy } = await policyOf(base)
            const annotation = await annotateBase(run, config, policy, ctx.attempt)
            const trained = await trainStage1(policy, annotation, config)
            const stats = {
              ...numericStats(trained as unknown as Record<string, unknown>, ['firstLoss', 'lastLoss']),
              ...annotation.stats,
            }
            const prefix = folderOf(keys.sftCheckpoint(run.runId, MODEL_FILE, ctx.attempt))
            const ref = await saveCheckpoint(store, prefix, toCheckpoint(policy))
            return { outputs: { ...(await checkpointOutputs(store, ref)), ...annotation.outputs }, stats }
          },
        )
        return { ...summaryOf(result), checkpoint: checkpointOf(result.outputs, 'stage1') }
      })
    },

    async snapshot(input: SnapshotInput) {
      return guarded('snapshot', async () => {
        const { run, iteration } = input
        const snapshot: Snapshot = {
          version: 1,
          run,
          iteration,
          acting: input.acting,
          reference: input.reference,
          analyzer: input.analyzer,
        }
        const result = await runPhase(
          phaseDeps,
          scope(run, 'snapshot', 0, iteration),
          await specOf(run, {
            acting: input.acting.sha256,
            reference: input.reference.sha256,
            ...(input.analyzer ? { analyzer: input.analyzer.sha256 } : {}),
          }),
          async (ctx) => ({
            outputs: { snapshot: await putJson(store, keys.snapshot(run.runId, iteration, ctx.attempt), snapshot) },
            stats: {},
          }),
        )
        return refOf(result.outputs.snapshot as ObjectInfo)
      })
    },

    async rollout({ run, iteration, shard, snapshot }) {
      return guarded(`rollout shard ${shard}`, async () => {
        const config = await configOf(run)
        const row: AlgorithmRow = ALGORITHMS[config.algorithm]
        const { shards } = await planOf(run)
        const library = row.actingSkill === 'library' ? await libraryOf(run, config.algorithm) : null
        const result = await runPhase(
          phaseDeps,
          scope(run, 'rollout', shard, iteration),
          await specOf(run, { snapshot: snapshot.sha256, ...(library ? { library: library.sha256 } : {}) }),
          async (ctx) => {
            const snap = await snapshotOf(snapshot)
            const { policy } = await policyOf(snap.acting)
            const seed = iterationSeed(config, iteration)
            const tasks = shardTasks(config, iteration, shard, shards)
            const s2 = config.stage2
            const pick = library ? picker(library.skills, mixSeed(seed, 2, shard)) : null
            const rolled = await rollout(policy, {
              env: config.env,
              tasks: tasks.map((t) => t.task),
              groupSize: s2.groupSize,
              maxEnvSteps: s2.maxEnvSteps,
              temperature: s2.temperature,
              prompt: config.prompt,
              seed: mixSeed(seed, 3, shard),
              ...(pick ? { actingSkills: tasks.map(() => pick()) } : {}),
            })
            const info = await store.put(
              keys.rollouts(run.runId, iteration, shard, ctx.attempt),
              encodeJsonlGz(rolled.trajectories),
            )
            const { truncation, ...stats } = rolled.stats
            return {
              outputs: { rollouts: info },
              stats: {
                ...numericStats(stats),
                success: rolled.stats.successRate,
                prompts: truncation.prompts,
                promptsTruncated: truncation.truncated,
                promptsBlockDropped: truncation.blockDropped,
                promptsFailed: truncation.failed,
              },
            }
          },
        )
        return summaryOf(result)
      })
    },

    async analyze({ run, iteration, shard, snapshot, rollouts }) {
      return guarded(`analyze shard ${shard}`, async () => {
        const config = await configOf(run)
        const result = await runPhase(
          phaseDeps,
          scope(run, 'analyze', shard, iteration),
          await specOf(run, { snapshot: snapshot.sha256, rollouts: rollouts.sha256 }),
          async (ctx) => {
            const snap = await snapshotOf(snapshot)
            if (!snap.analyzer) {
              throw fatal(`algorithm ${config.algorithm}: the snapshot has no analyzer`, 'PhaseContractError')
            }
            const { policy } = await policyOf(snap.analyzer)
            const analyzed = await analyze(policy, {
              trajectories: await trajectoriesOf(rollouts),
              prompt: config.prompt,
              maxPromptTokens: config.stage2.analyzer.maxPromptTokens,
              maxAnswerTokens: config.stage2.analyzer.maxAnswerTokens,
              batchSize: 64,
            })
            const info = await store.put(
              keys.skills(run.runId, iteration, shard, ctx.attempt),
              Buffer.from(analyzed.skills.map((s) => `${JSON.stringify(s)}\n`).join(''), 'utf8'),
            )
            const ok = analyzed.skills.filter((s) => s.ok).length
            return {
              outputs: { skills: info },
              stats: {
                skills: analyzed.skills.length,
                parsed: ok,
                parse_rate: ok / Math.max(1, analyzed.skills.length),
                truncated: analyzed.stats.truncated,
                newTokens: analyzed.stats.newTokens,
                seconds: analyzed.stats.seconds,
              },
            }
          },
        )
        return summaryOf(result)
      })
    },

    async rescore({ run, iteration, snapshot, rollouts, skills }) {
      return guarded('rescore', async () => {
        const config = await configOf(run)
        const row: AlgorithmRow = ALGORITHMS[config.algorithm]
        const library =
          row.teacherContext === 'prompt+skill' && row.skillSource === 'library' && needsLibrary(row)
            ? await libraryOf(run, config.algorithm)
            : null
        const inputs: Record<string, string> = { snapshot: snapshot.sha256 }
        rollouts.forEach((r, i) => {
          inputs[`rollouts/${i}`] = r.sha256
        })
        skills.forEach((s, i) => {
          inputs[`skills/${i}`] = s.sha256
        })
        if (library) inputs.library = library.sha256
        const result = await runPhase(
          phaseDeps,
          scope(run, 'rescore', 0, iteration),
          await specOf(run, inputs),
          async (ctx) => {
            const snap = await snapshotOf(snapshot)
            // shards are numbered locally: renumber trajectories and groups into one iteration-wide sequence
            const trajectories: RolloutTrajectory[] = []
            const blocks: (string | null)[] = []
            let groups = 0
            for (const [shard, ref] of rollouts.entries()) {
              const local = await trajectoriesOf(ref)
              const byLocal = new Map<number, number>()
              let shardGroups = 0
              for (const t of local) {
                byLocal.set(t.id, trajectories.length)
                shardGroups = Math.max(shardGroups, t.group + 1)
                trajectories.push({ ...t, id: trajectories.length, group: groups + t.group })
                blocks.push(null)
              }
              groups += shardGroups
              const skillRef = skills[shard]
              if (skillRef) {
                for (const s of await skillsOf(skillRef)) {
                  const at = byLocal.get(s.trajectory)
                  if (at === undefined) {
                    throw fatal(`${skillRef.key}: skill for unknown trajectory ${s.trajectory}`, 'CorruptArtifact')
                  }
                  if (s.ok && s.skill) blocks[at] = episodeSkillBlock(s.skill)
                }
              }
            }
            let teacherBlocks: (string | null)[] | undefined
            if (row.rescore?.teacher) {
              if (row.skillSource === 'self-analysis' || row.skillSource === 'reference-analysis')
                teacherBlocks = blocks
              else if (library) {
                const next = picker(library.skills, mixSeed(iterationSeed(config, iteration), 4))
                teacherBlocks = trajectories.map(() => episodeSkillBlock(next()))
              } else if (row.teacherContext === 'prompt+raw-trajectory')
                teacherBlocks = rawHindsightBlocks(trajectories)
            }
            const { policy } = await policyOf(snap.acting)
            const reference =
              snap.reference.sha256 === snap.acting.sha256 ? null : (await policyOf(snap.reference)).policy
            const scored = await rescore(policy, reference, {
              trajectories,
              ...(teacherBlocks ? { teacherBlocks } : {}),
              budget: {
                maxPromptTokens: config.prompt.maxPromptTokens,
                responseTokens: config.prompt.maxResponseTokens,
                contextLength: policy.model.config.maxPositions,
              },
              temperature: config.stage2.temperature,
              batchSize: 64,
            })
            const info = await store.put(
              keys.rescore(run.runId, iteration, 0, ctx.attempt),
              encodeRescore(scored.samples),
            )
            const fits = scored.stats.teacherTruncation
            return {
              outputs: { rescore: info },
              stats: {
                samples: scored.stats.samples,
                teacherSamples: scored.stats.teacherSamples,
                teacherPrompts: fits.prompts,
                teacherPromptsTruncated: fits.truncated,
                teacherBlocksDropped: fits.blockDropped,
                teacherPromptsFailed: fits.failed,
                maxSamplerGap: scored.stats.maxSamplerGap,
                ...teacherGapStats(scored.stats.teacherGap),
                seconds: scored.stats.seconds,
              },
            }
          },
        )
        return summaryOf(result)
      })
    },

    async update({ run, iteration, snapshot, rollouts, rescore: scoredRef }) {
      return guarded('update', async () => {
        const config = await configOf(run)
        const row: AlgorithmRow = ALGORITHMS[config.algorithm]
        if (!row.loss) throw fatal(`algorithm ${config.algorithm} has no RL update`, 'PhaseContractError')
        const terms = row.loss
        const inputs: Record<string, string> = { snapshot: snapshot.sha256, rescore: scoredRef.sha256 }
        rollouts.forEach((r, i) => {
          inputs[`rollouts/${i}`] = r.sha256
        })
        const result = await runPhase(
          phaseDeps,
          scope(run, 'update', 0, iteration),
          await specOf(run, inputs),
          async (ctx) => {
            const snap = await snapshotOf(snapshot)
            const samples = decodeRescore(await getExpected(store, scoredRef.key, scoredRef.sha256), scoredRef.key)
            const { policy, optimizer } = await policyOf(snap.acting)
            const updated = await update(policy, {
              samples,
              terms,
              settings: config.stage2,
              ...(optimizer ? { optimizerState: optimizer } : {}),
            })
            const stats = numericStats(updated.metrics as unknown as Record<string, unknown>, [
              'loss',
              'pgLoss',
              'gradNorm',
            ])
            for (const name of ['kl', 'entropy', 'opdLoss'] as const) {
              const v = updated.metrics[name]
              if (v !== null && !Number.isFinite(v)) throw fatal(`${name} is ${v}`, 'NonFiniteLossError')
            }
            const prefix = folderOf(keys.checkpoint(run.runId, iteration, MODEL_FILE, ctx.attempt))
            const ref = await saveCheckpoint(store, prefix, toCheckpoint(policy), updated.optimizerState)
            return { outputs: await checkpointOutputs(store, ref), stats }
          },
        )
        return { ...summaryOf(result), checkpoint: checkpointOf(result.outputs, 'update') }
      })
    },

    async evaluate({ run, iteration, label, checkpoint }) {
      return guarded(`evaluate ${label}`, async () => {
        const config = await configOf(run)
        const row: AlgorithmRow = ALGORITHMS[config.algorithm]
        // before Stage 2 there are two run-level evaluations: shard 0 is the base checkpoint, shard 1 Stage 1's
        const stage = iteration < 0 ? (label === 'base' ? 'base' : 'stage1') : null
        const library = row.evaluationSkill === 'library' ? await libraryOf(run, config.algorithm) : null
        const result = await runPhase(
          phaseDeps,
          stage === null ? scope(run, 'evaluate', 0, iteration) : scope(run, 'evaluate', stage === 'base' ? 0 : 1),
          await specOf(run, { checkpoint: checkpoint.sha256, ...(library ? { library: library.sha256 } : {}) }),
          async (ctx) => {
            const { policy } = await policyOf(checkpoint)
            const e = config.evaluation
            const seed = evaluationSeed(config.seed)
            const r = await evaluate(policy, {
              env: config.env,
              split: e.split,
              seedStart: e.seedStart,
              tasks: e.tasks,
              temperature: e.temperature,
              maxEnvSteps: e.maxEnvSteps,
              prompt: config.prompt,
              seed,
              ...(library ? { skills: evaluationSkills(library.skills, e.tasks, seed) } : {}),
              onProgress: (finished, episodes) => heartbeat({ phase: 'evaluate', step: finished, steps: episodes }),
            })
            const key =
              stage === null
                ? keys.evaluation(run.runId, iteration, ctx.attempt)
                : keys.stageEvaluation(run.runId, stage, ctx.attempt)
            // the per-task records go to the stored evaluation; the workflow gets the summary only
            const info = await putJson(store, key, {
              label,
              iteration,
              checkpoint,
              env: config.env,
              split: e.split,
              seeds: { from: e.seedStart, to: e.seedStart + e.tasks },
              temperature: e.temperature,
              ...r,
            })
            const a = r.aggregates
            return {
              outputs: { evaluation: info },
              stats: {
                success: r.successRate,
                standardError: r.standardError,
                ...(a.success.low !== null && a.success.high !== null
                  ? { successLow: a.success.low, successHigh: a.success.high }
                  : {}),
                macroSuccess: r.macroSuccessRate,
                meanScore: r.meanScore,
                meanLength: r.meanLength,
                invalidRate: r.invalidRate,
                tasks: r.tasks,
                seconds: r.seconds,
              },
            }
          },
        )
        return summaryOf(result)
      })
    },

    async recordHyperparameters(input) {
      return guarded(`recordHyperparameters ${input.change.seq}`, () => recordHyperparameters(store, input))
    },

    async recordIteration(input) {
      return guarded(`recordIteration ${input.iteration}`, async () => {
        const recorded = await recordIteration(phaseDeps, input)
        // retention (recorded, then deleted) once the iteration's own manifest is written
        await applyRetention({ store }, input.run, input.iteration, (await configOf(input.run)).retention)
        return recorded
      })
    },
  }
}
