// Deterministic: runs in the workflow sandbox. One Stage 2 iteration, read top to bottom like the paper.
import { ApplicationFailure, upsertSearchAttributes } from '@temporalio/workflow'
import type { CheckpointRef, PhaseSummary, RunPlan, RunRef } from '../activities/pipeline-types.ts'
import type { ArtifactRef } from '../activities/record-run.ts'
import { ALGORITHMS } from '../seed/algorithms.ts'
import { rolloutQueue, trainQueue } from './activity-proxies.ts'
import { SEED_ITERATION, SEED_PHASE } from './search-attributes.ts'

export interface IterationInput {
  run: RunRef
  plan: RunPlan
  iteration: number
  acting: CheckpointRef
  reference: CheckpointRef
  analyzer: CheckpointRef | null
}

export interface IterationResult {
  checkpoint: CheckpointRef
  /** Phase statistics, namespaced `phase/name`. */
  stats: Record<string, number>
}

/** Shows the running phase in the Web UI and in visibility queries (`SeedPhase = "rollout"`). */
function phase(name: string, iteration: number): void {
  upsertSearchAttributes([
    { key: SEED_PHASE, value: name },
    { key: SEED_ITERATION, value: iteration },
  ])
}

/** A named output of a phase; its absence breaks the contract between workflow and activities. */
function output(summary: PhaseSummary, name: string, what: string): ArtifactRef {
  const ref = summary.outputs[name]
  if (!ref)
    throw ApplicationFailure.nonRetryable(
      `${what} returned no '${name}' output (${summary.manifestKey})`,
      'PhaseContractError',
    )
  return ref
}

/** Mean of one statistic over shards. */
function mean(summaries: readonly PhaseSummary[], stat: string): number | undefined {
  const values = summaries.map((s) => s.stats[stat]).filter((v): v is number => v !== undefined)
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : undefined
}

export async function seedIteration(it: IterationInput): Promise<IterationResult> {
  const row = ALGORITHMS[it.plan.algorithm]
  const { run, iteration } = it
  phase('snapshot', iteration)
  const snapshot = await trainQueue.snapshot({
    run,
    iteration,
    acting: it.acting,
    reference: it.reference,
    analyzer: it.analyzer,
  })
  phase('rollout', iteration)
  const shards = Array.from({ length: it.plan.shards }, (_, shard) => shard)
  const rollouts = await Promise.all(shards.map((shard) => rolloutQueue.rollout({ run, iteration, shard, snapshot })))
  const rolloutRefs = rollouts.map((r, shard) => output(r, 'rollouts', `rollout shard ${shard}`))
  let skills: PhaseSummary[] = []
  if ((row.phases as readonly string[]).includes('analyze')) {
    phase('analyze', iteration)
    skills = await Promise.all(
      shards.map((shard) =>
        rolloutQueue.analyze({ run, iteration, shard, snapshot, rollouts: rolloutRefs[shard] as ArtifactRef }),
      ),
    )
  }
  phase('rescore', iteration)
  const skillRefs = skills.map((s, shard) => output(s, 'skills', `analyze shard ${shard}`))
  const scored = await trainQueue.rescore({ run, iteration, snapshot, rollouts: rolloutRefs, skills: skillRefs })
  phase('update', iteration)
  const next = await trainQueue.update({
    run,
    iteration,
    snapshot,
    rollouts: rolloutRefs,
    rescore: output(scored, 'rescore', 'rescore'),
  })
  const stats: Record<string, number> = {}
  for (const [name, summaries] of [
    ['rollout', rollouts],
    ['analyze', skills],
    ['rescore', [scored]],
    ['update', [next]],
  ] as const) {
    for (const stat of new Set(summaries.flatMap((s) => Object.keys(s.stats)))) {
      const m = mean(summaries, stat)
      if (m !== undefined) stats[`${name}/${stat}`] = m
    }
  }
  return { checkpoint: next.checkpoint, stats }
}
