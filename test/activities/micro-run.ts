// A whole micro run written to a store through the real pipeline activities, called in the order seedRun calls
// them (prepare → base evaluation → Stage 1 → its evaluation → iterations, each ending in recordIteration, with
// the evaluations the plan asks for): what audit, retention and export read, without a Temporal server.
import type { CheckpointRef, PhaseSummary, PipelineActivities, RunRef } from '../../activities/pipeline-types.ts'
import type { ArtifactRef } from '../../activities/record-run.ts'
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

export async function runMicro(acts: PipelineActivities, runId: string, config: RunConfig): Promise<MicroRun> {
  const { run, plan } = await acts.planRun({ runId, config })
  const base = (await acts.prepare({ run })).checkpoint
  await acts.evaluate({ run, iteration: -1, label: 'base', checkpoint: base })
  const stage1 = (await acts.stage1({ run, base })).checkpoint
  await acts.evaluate({ run, iteration: -1, label: 'stage 1', checkpoint: stage1 })
  const checkpoints: CheckpointRef[] = []
  const evaluated: number[] = []
  let acting = stage1
  for (let k = 0; k < plan.iterations; k++) {
    const snapshot = await acts.snapshot({ run, iteration: k, acting, reference: stage1, analyzer: acting })
    const shards = Array.from({ length: plan.shards }, (_, shard) => shard)
    const rolled = []
    for (const shard of shards) rolled.push(await acts.rollout({ run, iteration: k, shard, snapshot }))
    const rollouts = rolled.map((r) => output(r, 'rollouts'))
    const analyzed = []
    for (const [shard, ref] of rollouts.entries())
      analyzed.push(await acts.analyze({ run, iteration: k, shard, snapshot, rollouts: ref }))
    const skills = analyzed.map((a) => output(a, 'skills'))
    const scored = await acts.rescore({ run, iteration: k, snapshot, rollouts, skills })
    const next = await acts.update({
      run,
      iteration: k,
      snapshot,
      rollouts,
      rescore: output(scored, 'rescore'),
    })
    await acts.recordIteration({
      run,
      iteration: k,
      algorithm: plan.algorithm,
      snapshot,
      manifests: {
        rollout: rolled.map((r) => r.manifestKey),
        analyze: analyzed.map((a) => a.manifestKey),
        rescore: [scored.manifestKey],
        update: [next.manifestKey],
      },
    })
    acting = next.checkpoint
    checkpoints.push(acting)
    const last = k + 1 === plan.iterations
    if (last || (k + 1) % plan.evalEvery === 0) {
      await acts.evaluate({ run, iteration: k, label: `iteration ${k}`, checkpoint: acting })
      evaluated.push(k)
    }
  }
  return { run, base, stage1, checkpoints, evaluated }
}
