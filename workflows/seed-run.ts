// Deterministic: runs in the workflow sandbox. A whole run: plan → prepare → Stage 1 (rows that start from it;
// rows that only read its skill library get the library alone, `annotate`) → one child seedIteration per outer
// iteration → evaluations; continues as new every few iterations, carrying the whole run state. A failed
// iteration waits for an operator (workflows/run-operator.ts) instead of failing the run.
import {
  ApplicationFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  patched,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow'
import type {
  AnnotationCounts,
  CheckpointRef,
  EvaluationTarget,
  HyperparameterChange,
  PhaseSummary,
  RunPlan,
  RunRef,
  StoreRef,
} from '../records/contracts.ts'
import { targetLabel } from '../records/evaluation-target.ts'
import { ALGORITHMS, needsLibrary, needsStage1 } from '../seed/algorithms.ts'
import { boundProblems, runIdProblems, unknownKeyProblems } from '../seed/config-problems.ts'
import type { HyperparameterOverrides } from '../seed/hyperparameters.ts'
import { control, MODEL_AFFINITY, modelQueues } from './activity-proxies.ts'
import { type Evaluation, RunAborted, type RunProgress, type RunStatus, statusQuery } from './operator.ts'
import { RunOperator, VERIFY_ON_RESUME } from './run-operator.ts'
import { SEED_ALGORITHM, SEED_ENV, SEED_ITERATION, SEED_PHASE, SEED_SUCCESS_RATE } from './search-attributes.ts'

// Declared in operator.ts with the operator's other handles (run-operator.ts reads RunStatus too); the run's clients
// import them from here.
export { type Evaluation, type RunStatus, statusQuery }

/** Everything a continued run needs; carried by continueAsNew. */
export interface RunState {
  run: RunRef
  plan: RunPlan
  /** The next iteration to run. */
  iteration: number
  acting: CheckpointRef
  reference: CheckpointRef
  /** Analyzer for rows whose skills come from fixed weights (seed-static: π_0). */
  fixedAnalyzer: CheckpointRef | null
  /** The queue of the train worker that keeps `acting` loaded (model-affinity); absent: none known. */
  residentQueue?: string
  evaluations: Evaluation[]
  /** The operator's changes and pause (absent in runs continued before they existed). */
  overrides?: HyperparameterOverrides
  hyperparameters?: HyperparameterChange[]
  paused?: boolean
  /** How Stage 1's annotation went (absent where it did not run, and in runs continued before it was recorded). */
  annotation?: AnnotationCounts
}

export interface SeedRunInput {
  runId: string
  config: unknown
  /**
   * The store the run lives in, from the client that starts it (`seedflow run`): planRun records it and every
   * worker of another store refuses the run. Absent (`temporal workflow start`): the planning worker's store.
   */
  store?: StoreRef
  /** Set by continueAsNew only. */
  state?: RunState
}

export interface SeedRunResult {
  runId: string
  /** The last checkpoint; null when the run was aborted before it had one. */
  checkpoint: CheckpointRef | null
  evaluations: Evaluation[]
  /** `aborted`: ended by the operator's `abort` (the reason in `aborted`). */
  outcome: 'completed' | 'aborted'
  aborted?: string
  /** The store the run lives in (absent when it never got planned, and in runs planned before it was recorded). */
  store?: StoreRef
}

/** The fields of a seedRun input; any other is refused (a typo would otherwise be stored and ignored). */
const SEED_RUN_INPUT_FIELDS = ['runId', 'config', 'store', 'state']

export async function seedRun(input: SeedRunInput): Promise<SeedRunResult> {
  const { workflowId } = workflowInfo()
  const problems = [
    ...unknownKeyProblems(input, SEED_RUN_INPUT_FIELDS),
    ...runIdProblems(input?.runId, workflowId),
    ...storeProblems(input?.store),
  ]
  if (problems.length > 0)
    throw ApplicationFailure.nonRetryable(
      `invalid run input:\n${boundProblems(problems).join('\n')}`,
      'InvalidRunConfig',
    )
  const carried = input.state
  const status: RunProgress = {
    runId: input.runId,
    phase: 'prepare',
    iteration: carried?.iteration ?? 0,
    iterations: carried?.plan.iterations ?? 0,
    algorithm: carried?.plan.algorithm ?? null,
    evaluations: carried?.evaluations ?? [],
    awaitingOperator: null,
    hyperparameters: [],
    configSha256: null,
    ...(carried?.annotation ? { annotation: carried.annotation } : {}),
  }
  const operator = new RunOperator(
    input.config,
    status,
    carried?.run ?? null,
    carried && {
      overrides: carried.overrides ?? {},
      hyperparameters: carried.hyperparameters ?? [],
      paused: !!carried.paused,
    },
  )
  operator.install()
  setHandler(statusQuery, () => operator.view())
  let state: RunState | undefined = carried
  try {
    state = carried ?? (await start(input, status, operator))
    const first = state.iteration
    const row = ALGORITHMS[state.plan.algorithm]
    while (row.rl && state.iteration < state.plan.iterations) {
      const k = state.iteration
      const s = state
      const analyzer = row.analyzer === 'current' ? s.acting : row.analyzer === 'stage1' ? s.fixedAnalyzer : null
      const resident = s.residentQueue && patched(MODEL_AFFINITY) ? { residentQueue: s.residentQueue } : {}
      const result = await operator.phase(
        `iteration ${k}`,
        () =>
          operator.iteration({
            plan: s.plan,
            iteration: k,
            acting: s.acting,
            reference: s.reference,
            analyzer,
            ...resident,
          }),
        { iteration: k, status: { phase: 'iteration', iteration: k } },
      )
      state.acting = result.checkpoint
      if (result.residentQueue) state.residentQueue = result.residentQueue
      else delete state.residentQueue
      state.iteration = k + 1
      const last = state.iteration === state.plan.iterations
      status.iteration = state.iteration
      if (last || state.iteration % state.plan.evalEvery === 0) {
        const target: EvaluationTarget = { kind: 'iteration', iteration: k }
        await operator.phase('evaluate', () => evaluate(s, operator, target, status, last), { iteration: k })
      }
      if (!last && (state.iteration - first >= state.plan.iterationsPerRun || workflowInfo().continueAsNewSuggested)) {
        await condition(allHandlersFinished)
        await continueAsNew<typeof seedRun>({
          runId: input.runId,
          config: input.config,
          state: {
            ...state,
            run: operator.run as RunRef,
            ...operator.carry(),
            ...(status.annotation ? { annotation: status.annotation } : {}),
          },
        })
      }
    }
  } catch (error) {
    if (!(error instanceof RunAborted)) throw error
    upsertSearchAttributes([{ key: SEED_PHASE, value: 'aborted' }])
    status.phase = 'aborted'
    await condition(allHandlersFinished)
    return {
      runId: input.runId,
      checkpoint: state?.acting ?? null,
      evaluations: status.evaluations,
      outcome: 'aborted',
      aborted: error.message,
      ...storeOf(operator.run),
    }
  }
  upsertSearchAttributes([{ key: SEED_PHASE, value: 'done' }])
  status.phase = 'done'
  await condition(allHandlersFinished)
  return {
    runId: input.runId,
    checkpoint: state.acting,
    evaluations: state.evaluations,
    outcome: 'completed',
    ...storeOf(operator.run),
  }
}

/** The run's store for its result, where its RunRef records one. */
function storeOf(run: RunRef | null): { store?: StoreRef } {
  return run?.store ? { store: run.store } : {}
}

/** A store given in the input must be a store identity: `{ id, location }`, both strings. */
function storeProblems(store: unknown): string[] {
  if (store === undefined) return []
  const s = (typeof store === 'object' && store !== null ? store : {}) as Partial<Record<keyof StoreRef, unknown>>
  const ok = typeof s.id === 'string' && s.id !== '' && typeof s.location === 'string'
  return ok ? [] : [`store: expected { id, location } (the store's identity), got ${JSON.stringify(store)}`]
}

/**
 * Plan the run, make the base checkpoint, annotate where the row reads the library without Stage 1 (the base
 * evaluation of `skill-prompt` and `skill-grpo` already puts library skills in the prompt), run Stage 1 where
 * the row starts from it, evaluate both. A bad configuration fails the run at planRun; later failures wait for
 * an operator.
 */
async function start(input: SeedRunInput, status: RunProgress, operator: RunOperator): Promise<RunState> {
  upsertSearchAttributes([{ key: SEED_PHASE, value: 'prepare' }])
  const { run, plan, resumed } = await control.planRun({
    runId: input.runId,
    config: input.config,
    ...(input.store ? { store: input.store } : {}),
  })
  operator.run = run
  // a rerun of a run id reuses what it finds: re-hash it all first (runs from before this never did)
  if (resumed && patched(VERIFY_ON_RESUME)) await operator.orWait(-1, () => control.verifyRun({ run }))
  status.configSha256 = run.configSha256
  upsertSearchAttributes([
    { key: SEED_ENV, value: plan.env },
    { key: SEED_ALGORITHM, value: plan.algorithm },
  ])
  Object.assign(status, { iterations: plan.iterations, algorithm: plan.algorithm })
  if (plan.fork) return forked(run, plan, status, operator)
  const { trainQueue } = modelQueues(plan)
  const current = () => operator.run as RunRef
  const base = await operator.phase('prepare', () => trainQueue.prepare({ run: current() }))
  const state: RunState = {
    run,
    plan,
    iteration: 0,
    acting: base.checkpoint,
    reference: base.checkpoint,
    fixedAnalyzer: null,
    evaluations: status.evaluations,
  }
  await annotate(state, status, operator)
  await operator.phase('evaluate', () => evaluate(state, operator, { kind: 'base' }, status, true))
  return stage1(state, status, operator)
}

/** Stage 1 where the row starts from it (from a base made here or forked), and its evaluation. */
async function stage1(state: RunState, status: RunProgress, operator: RunOperator): Promise<RunState> {
  const row = ALGORITHMS[state.plan.algorithm]
  const { trainQueue } = modelQueues(state.plan)
  const current = () => operator.run as RunRef
  const base = state.acting
  if (needsStage1(row)) {
    const sft = await operator.phase('stage1', () => trainQueue.stage1({ run: current(), base }), { shows: true })
    recordAnnotation(status, sft)
    state.acting = sft.checkpoint
    state.reference = sft.checkpoint
    state.fixedAnalyzer = sft.checkpoint
    if (sft.residentQueue) state.residentQueue = sft.residentQueue
    await operator.phase('evaluate', () => evaluate(state, operator, { kind: 'stage1' }, status, true))
  }
  return state
}

/**
 * A forked run's start (`fork` in its configuration): the fork point's checkpoints copied from the other run;
 * from its base, this run annotates and makes its Stage 1 where its row needs them. A fork evaluates only what
 * it computes: the fork point's evaluations belong to the run it came from.
 */
async function forked(run: RunRef, plan: RunPlan, status: RunProgress, operator: RunOperator): Promise<RunState> {
  const { trainQueue } = modelQueues(plan)
  const current = () => operator.run as RunRef
  const copied = await operator.phase('fork', () => trainQueue.fork({ run: current() }), { shows: true })
  const state: RunState = {
    run,
    plan,
    iteration: copied.iteration,
    acting: copied.acting,
    reference: copied.reference,
    fixedAnalyzer: copied.stage1,
    evaluations: status.evaluations,
  }
  status.iteration = copied.iteration
  if (plan.fork?.at !== 'base') return state
  await annotate(state, status, operator)
  return stage1(state, status, operator)
}

/** The skill library alone (no Stage 1) for rows that read it but start from the base: state.acting. */
async function annotate(state: RunState, status: RunProgress, operator: RunOperator): Promise<void> {
  const row = ALGORITHMS[state.plan.algorithm]
  if (!needsLibrary(row) || needsStage1(row)) return
  const { rolloutQueue } = modelQueues(state.plan)
  const base = state.acting
  const current = () => operator.run as RunRef
  const annotated = await operator.phase('annotate', () => rolloutQueue.annotate({ run: current(), base }), {
    shows: true,
  })
  recordAnnotation(status, annotated)
}

/** Stage 1's annotation counts, from the stats its manifest records, into the run's status. */
function recordAnnotation(status: RunProgress, summary: PhaseSummary): void {
  const { trajectories, annotated, requestFailures, unparsed } = summary.stats
  if (trajectories === undefined || annotated === undefined) return
  status.annotation = { trajectories, annotated, requestFailures: requestFailures ?? 0, unparsed: unparsed ?? 0 }
}

/**
 * Evaluates the run's current checkpoint as `target`: the periodic evaluation and, at the start checkpoints and
 * the end (`endpoint`), every split of `evaluation.splits` too, each its own activity.
 */
async function evaluate(
  state: RunState,
  operator: RunOperator,
  target: EvaluationTarget,
  status: RunProgress,
  endpoint: boolean,
): Promise<void> {
  status.phase = 'evaluate'
  upsertSearchAttributes([
    { key: SEED_PHASE, value: 'evaluate' },
    { key: SEED_ITERATION, value: target.kind === 'iteration' ? target.iteration : 0 },
  ])
  const { rolloutQueue } = modelQueues(state.plan)
  const splits = endpoint ? (state.plan.endpointSplits ?? []) : []
  // recorded once every split is done: a retry after a failed split (orWait) runs them again, reused, and records
  // once (runs from before this recorded each split as it came; they replay that way)
  const once = splits.length === 0 || patched('evaluation-splits-recorded-once')
  const done: Evaluation[] = []
  for (let slot = 0; slot <= splits.length; slot++) {
    const run = operator.run as RunRef
    const result = await rolloutQueue.evaluate({
      run,
      target,
      checkpoint: state.acting,
      ...(slot > 0 ? { slot } : {}),
    })
    const evaluation: Evaluation = {
      label: targetLabel(target),
      iteration: target.kind === 'iteration' ? target.iteration : -1,
      target,
      ...(slot > 0 ? { split: splits[slot - 1] as string } : {}),
      success: result.stats.success ?? Number.NaN,
      standardError: result.stats.standardError ?? Number.NaN,
      macroSuccess: result.stats.macroSuccess ?? Number.NaN,
      tasks: result.stats.tasks ?? 0,
      checkpointSha256: state.acting.sha256,
      manifestKey: result.manifestKey,
    }
    if (once) done.push(evaluation)
    else recordEvaluations(state, [evaluation], slot === 0)
  }
  if (once) recordEvaluations(state, done, true)
}

/** Adds evaluations to the run's; the first one's success becomes the SeedSuccessRate search attribute. */
function recordEvaluations(state: RunState, evaluations: Evaluation[], periodic: boolean): void {
  state.evaluations.push(...evaluations)
  const success = evaluations[0]?.success ?? Number.NaN
  if (periodic && Number.isFinite(success)) upsertSearchAttributes([{ key: SEED_SUCCESS_RATE, value: success }])
}
