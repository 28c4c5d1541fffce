// The pipeline activities (docs/design.md §3), composed: every phase is a module of activities/phases/ run by
// the one phase shell (activities/phase-activity.ts), so a retried or re-run phase with the same config and
// inputs is reused, not recomputed. Besides the phases: planning a run, hyperparameter records, the end of an
// iteration.
import { checkRemoteEnvironment } from '../compute/environment-check.ts'
import { messageOf } from '../engine/errors.ts'
import type { Engine } from '../engine/index.ts'
import type { PipelineActivities, RunPlan, RunRef } from '../records/contracts.ts'
import { fatal } from '../records/failures.ts'
import { recordHyperparameters } from '../records/hyperparameters.ts'
import { createRecordRunActivities, type RunRecord } from '../records/record-run.ts'
import { envLabel, parseRunConfig } from '../seed/config.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { getJson, putJson } from '../store/json.ts'
import { keys } from '../store/keys.ts'
import { DamagedArtifactsError } from './damaged-artifacts.ts'
import { recordIteration } from './iteration-record.ts'
import type { PhaseCounters, PhaseHooks } from './phase.ts'
import { guarded, phaseShell } from './phase-activity.ts'
import { analyzePhase } from './phases/analyze.ts'
import { annotatePhase } from './phases/annotate.ts'
import { evaluatePhase } from './phases/evaluate.ts'
import { forkPhase } from './phases/fork.ts'
import { importPhase } from './phases/import.ts'
import { rescorePhase } from './phases/rescore.ts'
import { rolloutPhase } from './phases/rollout.ts'
import { snapshotPhase } from './phases/snapshot.ts'
import { stage1Phase } from './phases/stage1.ts'
import { updatePhase } from './phases/update.ts'
import { warmstartPhase } from './phases/warmstart.ts'
import type { ResidentPolicies } from './resident-policies.ts'
import { applyRetention } from './retention.ts'
import { boundToStore, storeBinding } from './store-binding.ts'
import { verifyRun } from './verify-run.ts'

export interface PipelineDeps {
  store: ArtifactStore
  engine: Engine
  counters?: PhaseCounters
  /** Episodes (tasks × samples) per rollout shard when planning a run; default 64. */
  episodesPerShard?: number
  /** Continue-as-new after this many iterations; default 5. */
  iterationsPerRun?: number
  /** Heartbeat timeout the planned run gives its model-bound activities (RunPlan); default: the workflows' 5 minutes. */
  heartbeatTimeoutSeconds?: number
  /** Hooks around every phase body (the worker's fault injection: workers/faults.ts phaseFaultHooks). */
  phaseHooks?: PhaseHooks
  /** Policies kept loaded between this worker's activities (activities/resident-policies.ts; default two). */
  resident?: ResidentPolicies
  /** The queue only this worker polls (workers/task-queues.ts residentQueueOf), told in every phase's result. */
  residentQueue?: string
}

export function createPipelineActivities(deps: PipelineDeps): PipelineActivities {
  const { store } = deps
  const shell = phaseShell(deps)
  const { recordRun } = createRecordRunActivities({ store })
  const binding = storeBinding(store)
  const warmstart = shell.activity(warmstartPhase)
  const importBase = shell.activity(importPhase)

  // every activity refuses a run of another store before it reads or writes (one store per run)
  return boundToStore(binding, {
    async planRun({ runId, config, store: given }) {
      return guarded('planRun', async () => {
        const parsed = parseRunConfig(config)
        if (!parsed.ok) {
          throw fatal(`invalid run config:\n${parsed.problems.join('\n')}`, 'InvalidRunConfig')
        }
        const c = parsed.config
        if (c.fork && (c.fork.run === runId || !(await store.head(keys.runRecord(c.fork.run)))))
          throw fatal(
            `invalid run config:\nfork.run: ${c.fork.run === runId ? 'a run cannot fork itself' : `no run named ${c.fork.run} in this store`}`,
            'InvalidRunConfig',
          )
        // the run lives in the store of the client that started it, else in this worker's (boundToStore checked
        // that they are one). run.json keeps the store the run was created in; a run moved since (its folder
        // copied into another store, a benchmark's run bundle) is planned, and bound, where it is now
        const own = await binding.identity()
        // a remote environment answers, opens an episode and has the routes the run needs, or the run is refused
        const environment =
          typeof c.env === 'string'
            ? undefined
            : await checkRemoteEnvironment(c.env, c).catch((error: unknown) => {
                throw fatal(`environment: ${messageOf(error)}`, 'EnvironmentUnavailable')
              })
        const record = await recordRun({
          runId,
          config: config as Record<string, unknown>,
          store: given ?? own,
          ...(environment ? { environment } : {}),
        })
        const recorded = (await getJson(store, record.key)) as RunRecord
        const run: RunRef = { runId, configSha256: recorded.configSha256, store: given ?? own }
        const episodes = c.stage2.tasksPerStep * c.stage2.groupSize
        const plan: RunPlan = {
          algorithm: c.algorithm,
          env: envLabel(c.env),
          iterations: c.stage2.iterations,
          shards: Math.max(1, Math.min(c.stage2.tasksPerStep, Math.ceil(episodes / (deps.episodesPerShard ?? 64)))),
          evalEvery: c.evaluation.every > 0 ? c.evaluation.every : Math.max(1, c.stage2.iterations),
          iterationsPerRun: deps.iterationsPerRun ?? 5,
          ...(deps.heartbeatTimeoutSeconds ? { heartbeatTimeoutSeconds: deps.heartbeatTimeoutSeconds } : {}),
          ...(c.evaluation.splits?.length ? { endpointSplits: c.evaluation.splits.map((s) => s.split) } : {}),
          ...(c.fork ? { fork: { runId: c.fork.run, at: c.fork.at } } : {}),
        }
        // the plan is part of the run: a second planRun (continue-as-new never replans) keeps the first one
        const planKey = keys.runPlan(runId)
        if (await store.head(planKey)) {
          const existing = (await getJson(store, planKey)) as RunPlan
          return { run, plan: existing, record, resumed: true }
        }
        await putJson(store, planKey, plan)
        return { run, plan, record }
      })
    },

    async prepare(input) {
      const { config } = await guarded('prepare', () => shell.effective(input.run))
      // a warm-start makes the base of either kind of model (an imported one from its folder's weights)
      return config.warmstart ? warmstart(input) : importBase(input)
    },
    fork: shell.activity(forkPhase),
    annotate: shell.activity(annotatePhase),
    stage1: shell.activity(stage1Phase),
    snapshot: shell.activity(snapshotPhase),
    rollout: shell.activity(rolloutPhase),
    analyze: shell.activity(analyzePhase),
    rescore: shell.activity(rescorePhase),
    update: shell.activity(updatePhase),
    evaluate: shell.activity(evaluatePhase),

    async verifyRun({ run }) {
      return guarded(`verifyRun ${run.runId}`, async () => {
        const checked = await verifyRun(store, run.runId)
        if (checked.damaged.length > 0) throw new DamagedArtifactsError(run.runId, checked.damaged)
        return { artifacts: checked.artifacts, bytes: checked.bytes }
      })
    },

    async recordHyperparameters(input) {
      return guarded(`recordHyperparameters ${input.change.seq}`, () => recordHyperparameters(store, input))
    },

    async recordIteration(input) {
      return guarded(`recordIteration ${input.iteration}`, async () => {
        const recorded = await recordIteration(shell.phaseDeps, input)
        // retention (recorded, then deleted) once the iteration's own manifest is written
        const { config } = await shell.effective(input.run)
        await applyRetention({ store }, input.run, input.iteration, config.retention)
        return recorded
      })
    },
  })
}
