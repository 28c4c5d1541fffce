// Deterministic: runs in the workflow sandbox. A whole run: plan → prepare → Stage 1 (rows that start from it;
// rows that only read its skill library get the library alone, `annotate`) → one child seedIteration per outer
// iteration → evaluations; continues as new every few iterations, carrying the whole run state.
import {
  ApplicationFailure,
  continueAsNew,
  defineQuery,
  executeChild,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow'
import type { CheckpointRef, RunPlan, RunRef } from '../activities/pipeline-types.ts'
import { ALGORITHMS, needsLibrary, needsStage1 } from '../seed/algorithms.ts'
import { control, modelQueues } from './activity-proxies.ts'
import { SEED_ALGORITHM, SEED_ENV, SEED_ITERATION, SEED_PHASE, SEED_SUCCESS_RATE } from './search-attributes.ts'
import { seedIteration } from './seed-iteration.ts'

export interface Evaluation {
  label: string
  iteration: number
  success: number
  /** Standard error of `success` over the evaluated tasks. */
  standardError: number
  tasks: number
  manifestKey: string
}

/** What the `status` query answers: where the run is and its evaluations so far. */
export interface RunStatus {
  runId: string
  /** prepare, annotate, stage1, iteration, evaluate or done. */
  phase: string
  /** The iteration running (or next), and how many the run has. */
  iteration: number
  iterations: number
  algorithm: string | null
  evaluations: Evaluation[]
}

export const statusQuery = defineQuery<RunStatus>('status')

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
  evaluations: Evaluation[]
}

export interface SeedRunInput {
  runId: string
  config: unknown
  /** Set by continueAsNew only. */
  state?: RunState
}

export interface SeedRunResult {
  runId: string
  checkpoint: CheckpointRef
  evaluations: Evaluation[]
}

export async function seedRun(input: SeedRunInput): Promise<SeedRunResult> {
  const { workflowId } = workflowInfo()
  if (input?.runId !== workflowId) {
    throw ApplicationFailure.nonRetryable(
      `runId: ${JSON.stringify(input?.runId)} differs from the workflow id ${JSON.stringify(workflowId)}`,
      'InvalidRunConfig',
    )
  }
  const status: RunStatus = {
    runId: input.runId,
    phase: 'prepare',
    iteration: input.state?.iteration ?? 0,
    iterations: input.state?.plan.iterations ?? 0,
    algorithm: input.state?.plan.algorithm ?? null,
    evaluations: input.state?.evaluations ?? [],
  }
  setHandler(statusQuery, () => status)
  const state = input.state ?? (await start(input, status))
  const first = state.iteration
  const row = ALGORITHMS[state.plan.algorithm]
  while (row.rl && state.iteration < state.plan.iterations) {
    const k = state.iteration
    Object.assign(status, { phase: 'iteration', iteration: k })
    const analyzer = row.analyzer === 'current' ? state.acting : row.analyzer === 'stage1' ? state.fixedAnalyzer : null
    const result = await executeChild(seedIteration, {
      workflowId: `${state.run.runId}/iter-${k}`,
      args: [
        { run: state.run, plan: state.plan, iteration: k, acting: state.acting, reference: state.reference, analyzer },
      ],
    })
    state.acting = result.checkpoint
    state.iteration = k + 1
    const last = state.iteration === state.plan.iterations
    status.iteration = state.iteration
    if (last || state.iteration % state.plan.evalEvery === 0) await evaluate(state, `iteration ${k}`, k, status)
    if (!last && (state.iteration - first >= state.plan.iterationsPerRun || workflowInfo().continueAsNewSuggested)) {
      await continueAsNew<typeof seedRun>({ runId: input.runId, config: input.config, state })
    }
  }
  upsertSearchAttributes([{ key: SEED_PHASE, value: 'done' }])
  status.phase = 'done'
  return { runId: state.run.runId, checkpoint: state.acting, evaluations: state.evaluations }
}

/**
 * Plan the run, make the base checkpoint, annotate where the row reads the library without Stage 1 (the base
 * evaluation of `skill-prompt` and `skill-grpo` already puts library skills in the prompt), run Stage 1 where
 * the row starts from it, evaluate both.
 */
async function start(input: SeedRunInput, status: RunStatus): Promise<RunState> {
  upsertSearchAttributes([{ key: SEED_PHASE, value: 'prepare' }])
  const { run, plan } = await control.planRun({ runId: input.runId, config: input.config })
  upsertSearchAttributes([
    { key: SEED_ENV, value: plan.env },
    { key: SEED_ALGORITHM, value: plan.algorithm },
  ])
  Object.assign(status, { iterations: plan.iterations, algorithm: plan.algorithm })
  const row = ALGORITHMS[plan.algorithm]
  const { rolloutQueue, trainQueue } = modelQueues(plan)
  const base = await trainQueue.prepare({ run })
  const state: RunState = {
    run,
    plan,
    iteration: 0,
    acting: base.checkpoint,
    reference: base.checkpoint,
    fixedAnalyzer: null,
    evaluations: status.evaluations,
  }
  if (needsLibrary(row) && !needsStage1(row)) {
    upsertSearchAttributes([{ key: SEED_PHASE, value: 'annotate' }])
    status.phase = 'annotate'
    await rolloutQueue.annotate({ run, base: base.checkpoint })
  }
  await evaluate(state, 'base', -1, status)
  if (needsStage1(row)) {
    upsertSearchAttributes([{ key: SEED_PHASE, value: 'stage1' }])
    status.phase = 'stage1'
    const sft = await trainQueue.stage1({ run, base: base.checkpoint })
    state.acting = sft.checkpoint
    state.reference = sft.checkpoint
    state.fixedAnalyzer = sft.checkpoint
    await evaluate(state, 'stage 1', -1, status)
  }
  return state
}

async function evaluate(state: RunState, label: string, iteration: number, status: RunStatus): Promise<void> {
  status.phase = 'evaluate'
  upsertSearchAttributes([
    { key: SEED_PHASE, value: 'evaluate' },
    { key: SEED_ITERATION, value: Math.max(iteration, 0) },
  ])
  const { rolloutQueue } = modelQueues(state.plan)
  const result = await rolloutQueue.evaluate({ run: state.run, iteration, label, checkpoint: state.acting })
  const success = result.stats.success ?? Number.NaN
  state.evaluations.push({
    label,
    iteration,
    success,
    standardError: result.stats.standardError ?? Number.NaN,
    tasks: result.stats.tasks ?? 0,
    manifestKey: result.manifestKey,
  })
  if (Number.isFinite(success)) upsertSearchAttributes([{ key: SEED_SUCCESS_RATE, value: success }])
}
