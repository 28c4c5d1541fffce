// Rescore: every step sample of the iteration scored under π_old, the KL reference and, where the row
// distills, the teacher (π_k reading the block the plan gives each trajectory: compute/plan.ts) and, with
// the `control` OPD gate (or the `controlGap` diagnostic), π_k reading another task's block.

import { type RolloutTrajectory, rescore, type SideMeans, type SkillRecord } from '../../compute/index.ts'
import { controlBlocks, iterationPlan, libraryUse, scoresControl, teacherBlocks } from '../../compute/plan.ts'
import { stepBudget } from '../../compute/prompts.ts'
import type { RescoreInput } from '../../records/contracts.ts'
import { fatal } from '../../records/failures.ts'
import { encodeRescore } from '../../records/rescore-format.ts'
import { ALGORITHMS } from '../../seed/algorithms.ts'
import type { RunConfig } from '../../seed/config.ts'
import { keys } from '../../store/keys.ts'
import { heartbeat, type PhaseDef, scopeOf } from '../phase-activity.ts'

const needs = (c: RunConfig) => ({
  seed: c.seed,
  env: c.env,
  algorithm: c.algorithm,
  prompt: c.prompt,
  stage2: {
    tasksPerStep: c.stage2.tasksPerStep,
    groupSize: c.stage2.groupSize,
    temperature: c.stage2.temperature,
    opdGate: c.stage2.opdGate,
    controlGap: c.stage2.controlGap,
    oraclePlan: c.stage2.oraclePlan,
  },
})

/** A rescore gap as manifest statistics `{name}Expert`, `{name}Other` and their sample counts (no samples: 0, weight 0). */
function gapStats(name: 'teacherGap' | 'controlGap', gap: SideMeans | null): Record<string, number> {
  if (!gap) return {}
  return {
    [`${name}Expert`]: gap.expert ?? 0,
    [`${name}ExpertSamples`]: gap.expertSamples,
    [`${name}Other`]: gap.other ?? 0,
    [`${name}OtherSamples`]: gap.otherSamples,
  }
}

interface ShardData {
  key: string
  trajectories: RolloutTrajectory[]
  skills: SkillRecord[] | null
}

/**
 * The iteration's trajectories from its shards, numbered iteration-wide, and the analyzer's skill per
 * trajectory. Rollouts number their trajectories by global episode index; rollouts written before that (each
 * shard from 0) are renumbered in shard order, as they were then.
 */
export function mergeShards(shards: readonly ShardData[]): {
  trajectories: RolloutTrajectory[]
  analysis: Map<number, string>
} {
  const ids = shards.flatMap((s) => s.trajectories.map((t) => t.id))
  const global = new Set(ids).size === ids.length
  const trajectories: RolloutTrajectory[] = []
  const analysis = new Map<number, string>()
  let groups = 0
  for (const shard of shards) {
    const idOf = new Map<number, number>()
    let shardGroups = 0
    for (const t of shard.trajectories) {
      const id = global ? t.id : trajectories.length
      idOf.set(t.id, id)
      shardGroups = Math.max(shardGroups, t.group + 1)
      trajectories.push(global ? t : { ...t, id, group: groups + t.group })
    }
    groups += shardGroups
    for (const s of shard.skills ?? []) {
      const at = idOf.get(s.trajectory)
      if (at === undefined) throw fatal(`${shard.key}: skill for unknown trajectory ${s.trajectory}`, 'CorruptArtifact')
      if (s.ok && s.skill) analysis.set(at, s.skill)
    }
  }
  trajectories.sort((a, b) => a.id - b.id)
  return { trajectories, analysis }
}

export const rescorePhase: PhaseDef<RescoreInput, ReturnType<typeof needs>> = {
  describe: () => 'rescore',
  needs,
  async plan({ run, iteration, snapshot, rollouts, skills }, c, read) {
    const row = ALGORITHMS[c.algorithm]
    const library = libraryUse(row).teacher ? await read.library(run, c.algorithm) : null
    const inputs: Record<string, string> = { snapshot: snapshot.sha256 }
    rollouts.forEach((r, i) => {
      inputs[`rollouts/${i}`] = r.sha256
    })
    skills.forEach((s, i) => {
      inputs[`skills/${i}`] = s.sha256
    })
    if (library) inputs.library = library.sha256
    return {
      scope: scopeOf(run, 'rescore', 0, iteration),
      inputs,
      async compute({ store, attempt }) {
        const snap = await read.snapshot(snapshot)
        const shards: ShardData[] = []
        for (const [shard, ref] of rollouts.entries()) {
          const skillRef = skills[shard]
          shards.push({
            key: skillRef?.key ?? ref.key,
            trajectories: await read.trajectories(ref),
            skills: skillRef ? await read.skills(skillRef) : null,
          })
        }
        const { trajectories, analysis } = mergeShards(shards)
        const blocks = await teacherBlocks(iterationPlan(c, iteration), row, trajectories, {
          analysis,
          oraclePlan: c.stage2.oraclePlan ?? 'start',
          ...(library ? { library: library.skills } : {}),
        })
        const controls = blocks && scoresControl(c.stage2) ? controlBlocks(blocks, trajectories) : undefined
        const acting = await read.policy(snap.acting, { resident: true })
        const { policy } = acting
        const held =
          snap.reference.sha256 === snap.acting.sha256 ? null : await read.policy(snap.reference, { resident: true })
        const reference = held?.policy ?? null
        const scored = await rescore(policy, reference, {
          trajectories,
          ...(blocks ? { teacherBlocks: blocks } : {}),
          ...(controls ? { controlBlocks: controls } : {}),
          budget: stepBudget(c.prompt, policy.model.config.maxPositions),
          temperature: c.stage2.temperature,
          batchSize: 64,
          onProgress: (step, steps) => heartbeat({ phase: 'rescore', step, steps }),
        })
        const info = await store.put(keys.rescore(run.runId, iteration, 0, attempt), encodeRescore(scored.samples))
        // scoring changes nothing: the update (and the next rescore's reference) on this worker take them again
        if (held) await read.keep(snap.reference, held.policy, held.optimizer)
        await read.keep(snap.acting, policy, acting.optimizer)
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
            ...gapStats('teacherGap', scored.stats.teacherGap),
            ...gapStats('controlGap', scored.stats.controlGap),
            ...(controls ? { uncontrolledSamples: scored.stats.uncontrolledSamples } : {}),
            seconds: scored.stats.seconds,
          },
        }
      },
    }
  },
}
