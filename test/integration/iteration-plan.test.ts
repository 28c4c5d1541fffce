// One iteration of the seed row through the Temporal path (seedRun → seedIteration → the activities on the
// real dev server and S3 store), its artifacts checked against the pure plan (compute/plan.ts): each
// shard's tasks and episode numbering, the teacher context of every rescored sample (the analyzer's skill where
// it wrote one, none where it did not). The run is a fork of a base run, evaluated on a second split at its
// endpoints.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { RolloutTrajectory, SkillRecord } from '../../compute/index.ts'
import { iterationPlan } from '../../compute/plan.ts'
import { decodeJsonlGz } from '../../records/jsonl.ts'
import type { PhaseManifest } from '../../records/phase-manifest.ts'
import { decodeRescore } from '../../records/rescore-format.ts'
import { parseSkillLines } from '../../records/skill-library.ts'
import { getJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import type { S3ArtifactStore } from '../../store/s3-store.ts'
import { microConfig, plannedShardEpisodes, shardEpisodes } from '../compute/micro.ts'
import { type PipelineHarness, startPipeline } from './pipeline-harness.ts'

const BASE = `plan-base-${process.pid}`
const RUN = `plan-seed-${process.pid}`

describe('one iteration through Temporal follows the pure plan', () => {
  let harness: PipelineHarness
  let store: S3ArtifactStore

  before(async () => {
    harness = await startPipeline(`iteration-plan-${process.pid}`)
    store = harness.store
  })
  after(async () => {
    await harness?.close()
  })

  it('a base run, then a seed run forked from it: tasks, episodes and teacher contexts as planned', async () => {
    const c = microConfig('grpo')
    const evaluation = { ...c.evaluation, tasks: 2, every: 1, splits: [{ split: 'validation' as const, tasks: 2 }] }
    const base = await harness.run(BASE, { ...c, stage2: { ...c.stage2, iterations: 0 }, evaluation })
    assert.deepEqual(
      base.evaluations.map((e) => [e.label, e.split ?? c.evaluation.split]),
      [
        ['base', c.evaluation.split],
        ['base', 'validation'],
      ],
    )

    const seed = { ...microConfig('seed'), evaluation, fork: { run: BASE, at: 'base' as const } }
    const result = await harness.run(RUN, seed)
    // the fork evaluates only what it computes: Stage 1 and the last iteration, each on both splits
    assert.deepEqual(
      result.evaluations.map((e) => [e.label, e.split ?? null]),
      [
        ['stage 1', null],
        ['stage 1', 'validation'],
        ['iteration 0', null],
        ['iteration 0', 'validation'],
      ],
    )
    const forkManifest = (await getJson(store, keys.stagePhaseManifest(RUN, 'fork', 0))) as PhaseManifest
    const baseManifest = (await getJson(store, keys.stagePhaseManifest(BASE, 'warmstart', 0))) as PhaseManifest
    assert.equal(
      forkManifest.outputs['base/model.safetensors']?.sha256,
      baseManifest.outputs['model.safetensors']?.sha256,
    )

    const plan = iterationPlan(seed, 0)
    const runPlan = (await getJson(store, keys.runPlan(RUN))) as { shards: number }
    assert.ok(runPlan.shards > 1, `${runPlan.shards} shards`)
    const trajectories: RolloutTrajectory[] = []
    const skills = new Map<number, SkillRecord>()
    for (let shard = 0; shard < runPlan.shards; shard++) {
      const rolloutKey = keys.rollouts(RUN, 0, shard)
      const got = decodeJsonlGz(await store.get(rolloutKey), rolloutKey) as RolloutTrajectory[]
      assert.deepEqual(shardEpisodes(got), plannedShardEpisodes(plan, shard, runPlan.shards), `rollout shard ${shard}`)
      trajectories.push(...got)
      const skillKey = keys.skills(RUN, 0, shard)
      for (const s of parseSkillLines((await store.get(skillKey)).toString('utf8'), skillKey))
        skills.set(s.trajectory, s)
    }
    assert.equal(skills.size, trajectories.length, 'one skill record per trajectory')

    // the teacher reads the skill the analyzer wrote for that trajectory, and nothing where it wrote none
    const rescoreKey = keys.rescore(RUN, 0, 0)
    const samples = decodeRescore(await store.get(rescoreKey), rescoreKey)
    const rescore = (await getJson(store, keys.phaseManifest(RUN, 0, 'rescore', 0))) as PhaseManifest
    let dropped = 0
    for (const s of samples) {
      const skill = skills.get(s.trajectory)
      const taught = s.teacherPromptIds !== null
      if (!(skill?.ok && skill.skill)) assert.equal(taught, false, `trajectory ${s.trajectory} has no skill`)
      else if (!taught) dropped++
    }
    assert.equal(dropped, rescore.stats.teacherBlocksDropped)
    assert.equal(samples.filter((s) => s.teacherPromptIds !== null).length, rescore.stats.teacherSamples)
  })
})
