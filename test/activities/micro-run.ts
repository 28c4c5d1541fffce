// A whole micro run written to a store through the real pipeline activities, called in the order seedRun calls
// them (prepare → base evaluation → Stage 1 → its evaluation → iterations, each ending in recordIteration, with
// the evaluations the plan asks for): what audit, retention and export read, without a Temporal server.
import type {
  ArtifactRef,
  CheckpointRef,
  PhaseSummary,
  PipelineActivities,
  RunPlan,
  RunRef,
  UpdateSummary,
} from '../../records/contracts.ts'
import { ALGORITHMS } from '../../seed/algorithms.ts'
import type { RunConfig } from '../../seed/config.ts'

export interface MicroRun {
  run: RunRef
  base: CheckpointRef
  stage1: CheckpointRef
  /** The checkpoint each iteration wrote. */
  checkpoints: CheckpointRef[]
  /** Iterations that were evaluated. */
  evaluated: number[]
}

function output(summary: PhaseSummary, name: string): ArtifactRef {
  const ref = summary.outputs[name]
  if (!ref) throw new Error(`${summary.manifestKey} has no output ${name}`)
  return ref
}

/** What one iteration of the activities left: the summaries seedIteration would see, in its order. */
export interface MicroIteration {
  snapshot: ArtifactRef
  rollouts: PhaseSummary[]
  analyzed: PhaseSummary[]
  scored: PhaseSummary
  updated: UpdateSummary
}

/**
 * One iteration through the activities in seedIteration's order (workflows/seed-iteration.ts), shards one after
 * the other; analyze where the row has it.
 */
export async function iterateMicro(
  acts: PipelineActivities,
  run: RunRef,
  plan: RunPlan,
  k: number,
  weights: { acting: CheckpointRef; reference: CheckpointRef; analyzer: CheckpointRef | null },
): Promise<MicroIteration> {
  const snapshot = await acts.snapshot({ run, iteration: k, ...weights })
  const rolled: PhaseSummary[] = []
  for (let shard = 0; shard < plan.shards; shard++)
    rolled.push(await acts.rollout({ run, iteration: k, shard, snapshot }))
  const rollouts = rolled.map((r) => output(r, 'rollouts'))
  const analyzed: PhaseSummary[] = []
  if ((ALGORITHMS[plan.algorithm].phases as readonly string[]).includes('analyze'))
    for (const [shard, ref] of rollouts.entries())
      analyzed.push(await acts.analyze({ run, iteration: k, shard, snapshot, rollouts: ref }))
  const skills = analyzed.map((a) => output(a, 'skills'))
  const scored = await acts.rescore({ run, iteration: k, snapshot, rollouts, skills })
  const updated = await acts.update({ run, iteration: k, snapshot, rollouts, rescore: output(scored, 'rescore') })
  await acts.recordIteration({
    run,
    iteration: k,
    algorithm: plan.algorithm,
    snapshot,
    manifests: {
      rollout: rolled.map((r) => r.manifestKey),
      analyze: analyzed.map((a) => a.manifestKey),
      rescore: [scored.manifestKey],
      update: [updated.manifestKey],
    },
  })
  return { snapshot, rollouts: rolled, analyzed, scored, updated }
}

export async function runMicro(acts: PipelineActivities, runId: string, config: RunConfig): Promise<MicroRun> {
  const { run, plan } = await acts.planRun({ runId, config })
  const base = (await acts.prepare({ run })).checkpoint
  await acts.evaluate({ run, target: { kind: 'base' }, checkpoint: base })
  const stage1 = (await acts.stage1({ run, base })).checkpoint
  await acts.evaluate({ run, target: { kind: 'stage1' }, checkpoint: stage1 })
  const checkpoints: CheckpointRef[] = []
  const evaluated: number[] = []
  let acting = stage1
  for (let k = 0; k < plan.iterations; k++) {
    const it = await iterateMicro(acts, run, plan, k, { acting, reference: stage1, analyzer: acting })
    acting = it.updated.checkpoint
    checkpoints.push(acting)
    const last = k + 1 === plan.iterations
    if (last || (k + 1) % plan.evalEvery === 0) {
      await acts.evaluate({ run, target: { kind: 'iteration', iteration: k }, checkpoint: acting })
      evaluated.push(k)
    }
  }
  return { run, base, stage1, checkpoints, evaluated }
}
