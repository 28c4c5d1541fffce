// One micro iteration per algorithm row through the pipeline activities, each row's run forked from one source
// run's Stage 1: which phases ran, which loss terms were on and non-zero, and that the iteration followed the
// pure plan (compute/plan.ts): its tasks, episode numbering and acting skills.
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { createPipelineActivities } from '../../activities/pipeline.ts'
import { actingSkills, iterationPlan, lossTerms, shardTasks } from '../../compute/plan.ts'
import type { RolloutTrajectory } from '../../compute/rollout.ts'
import { createLocalEngine } from '../../engine/index.ts'
import type { PipelineActivities, RunRef } from '../../records/contracts.ts'
import { decodeJsonlGz } from '../../records/jsonl.ts'
import { readSkillLibrary } from '../../records/skill-library.ts'
import { ALGORITHM_NAMES, ALGORITHMS } from '../../seed/index.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { iterateMicro } from '../activities/micro-run.ts'
import { microConfig, plannedShardEpisodes, shardEpisodes } from './micro.ts'

const engine = createLocalEngine({ threads: 1 })
let root: string
let store: FsArtifactStore
let acts: PipelineActivities
let source: RunRef

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'seedflow-rows-'))
  store = new FsArtifactStore(root)
  acts = createPipelineActivities({ store, engine, episodesPerShard: 8 })
  ;({ run: source } = await acts.planRun({ runId: 'rows-source', config: microConfig('seed') }))
  const base = await acts.prepare({ run: source })
  await acts.stage1({ run: source, base: base.checkpoint })
})
after(async () => {
  await engine.close()
  await rm(root, { recursive: true, force: true })
})

describe('one iteration per algorithm row', () => {
  for (const name of ALGORITHM_NAMES) {
    const row = ALGORITHMS[name]
    it(`${name}: ${row.rl ? row.phases.join(' → ') : 'no RL iterations'}`, async () => {
      if (!row.rl) {
        assert.throws(() => lossTerms(name), /has no RL update/)
        return
      }
      const config = { ...microConfig(name), fork: { run: 'rows-source', at: 'stage1' as const } }
      const { run, plan } = await acts.planRun({ runId: `row-${name}`, config })
      const forked = await acts.fork({ run })
      assert.equal(forked.iteration, 0)
      const analyzer = row.analyzer === 'current' ? forked.acting : row.analyzer === 'stage1' ? forked.stage1 : null
      const r = await iterateMicro(acts, run, plan, 0, { acting: forked.acting, reference: forked.reference, analyzer })
      assert.equal(r.analyzed.length > 0, (row.phases as readonly string[]).includes('analyze'))

      // the rollouts are the plan's: each shard's tasks, episodes numbered globally, the acting skills
      const want = iterationPlan(config, 0)
      const library = (await readSkillLibrary(store, run.runId, name)).skills
      for (const [shard, summary] of r.rollouts.entries()) {
        const ref = summary.outputs.rollouts as NonNullable<(typeof summary.outputs)['rollouts']>
        const got = decodeJsonlGz(await store.get(ref.key), ref.key) as RolloutTrajectory[]
        const groups = shardTasks(want, shard, plan.shards)
        assert.deepEqual(shardEpisodes(got), plannedShardEpisodes(want, shard, plan.shards))
        if (row.actingSkill === 'library') {
          const skills = actingSkills(want, library, groups)
          for (const t of got) {
            const skill = t.steps[0]?.skill
            if (skill !== null) assert.equal(skill, skills[groups.indexOf(t.group)])
          }
        }
      }

      const u = r.updated.stats
      assert.ok((u.miniBatches ?? 0) >= 2)
      assert.ok((u.kl ?? 0) > 0, `KL ${u.kl} (0 on the first mini-batch, then > 0)`)
      assert.ok((u.entropy ?? 0) > 0)
      const s = r.scored.stats
      if (!row.loss?.opd) {
        assert.equal(s.teacherSamples, 0)
        assert.equal(u.opdLoss, undefined)
      }
      if (name === 'seed-library') {
        assert.equal(s.teacherSamples, s.samples)
        assert.ok((u.opdGateMean ?? 0) > 0)
        assert.ok(u.opdLoss !== undefined && u.opdLoss !== 0)
      }
      if (name === 'seed-oracle') {
        // the sokoban expert solves every task, so every sample reads the privileged skill
        assert.equal(s.teacherSamples, s.samples)
        assert.ok(u.opdLoss !== undefined && u.opdLoss !== 0)
      }
      if (name === 'skill-grpo') assert.equal(r.rollouts[0]?.stats.promptsBlockDropped, 0)
    })
  }
})

describe('stage2.stage1Mix through the update activity', () => {
  it("runs the mixed-in steps after the RL pass on the run's Stage 1 annotations, recorded as mix stats", async () => {
    const micro = microConfig('seed')
    const mix = { steps: 3, batchSize: 4, lr: 1e-3, analyzerShare: 0.5 }
    const config = {
      ...micro,
      stage2: { ...micro.stage2, stage1Mix: mix },
      fork: { run: 'rows-source', at: 'stage1' as const },
    }
    const { run, plan } = await acts.planRun({ runId: 'row-seed-mix', config })
    const forked = await acts.fork({ run })
    const r = await iterateMicro(acts, run, plan, 0, {
      acting: forked.acting,
      reference: forked.reference,
      analyzer: forked.acting,
    })
    const u = r.updated.stats
    assert.equal(u.mixSteps, 3)
    assert.ok((u.mixAnalyzerPairs ?? 0) > 0 && (u.mixSkillDemos ?? 0) > 0, JSON.stringify(u))
    assert.ok(Number.isFinite(u.mixLastLoss))
    // per pool: the steps split between the analyzer's answers and the skill-reading demonstrations
    assert.equal((u.mixAnalyzerSteps ?? 0) + (u.mixSkillSteps ?? 0), 3, JSON.stringify(u))
    assert.ok((u.miniBatches ?? 0) >= 2, 'the RL pass ran too')
  })
})

describe('rollouts do not depend on how the iteration is sharded', () => {
  it('one shard and several give identical trajectories (one ORT thread)', async () => {
    const trajectoriesWith = async (episodesPerShard: number, runId: string) => {
      const sharded = createPipelineActivities({ store, engine, episodesPerShard })
      const config = { ...microConfig('grpo'), fork: { run: 'rows-source', at: 'base' as const } }
      const { run, plan } = await sharded.planRun({ runId, config })
      const forked = await sharded.fork({ run })
      const snapshot = await sharded.snapshot({
        run,
        iteration: 0,
        acting: forked.acting,
        reference: forked.reference,
        analyzer: null,
      })
      const all: RolloutTrajectory[] = []
      for (let shard = 0; shard < plan.shards; shard++) {
        const ref = (await sharded.rollout({ run, iteration: 0, shard, snapshot })).outputs.rollouts
        assert.ok(ref)
        all.push(...(decodeJsonlGz(await store.get(ref.key), ref.key) as RolloutTrajectory[]))
      }
      return { shards: plan.shards, trajectories: all.sort((a, b) => a.id - b.id) }
    }
    const one = await trajectoriesWith(1_000_000, 'shards-one')
    const many = await trajectoriesWith(2, 'shards-many')
    assert.equal(one.shards, 1)
    assert.ok(many.shards > 1, `${many.shards} shards`)
    // every token, action, reward and prompt is identical; the sampler's log-probs (a diagnostic: rescore
    // recomputes π_old over the merged iteration) differ in the last float32 bit, because a shard's batch pads
    // its prompts to another length
    const without = (ts: RolloutTrajectory[]) =>
      JSON.stringify(ts.map((t) => ({ ...t, steps: t.steps.map(({ samplerLogprobs: _, ...step }) => step) })))
    assert.equal(without(many.trajectories), without(one.trajectories))
    let gap = 0
    for (const [i, t] of many.trajectories.entries())
      for (const [j, step] of t.steps.entries())
        for (const [n, lp] of step.samplerLogprobs.entries())
          gap = Math.max(gap, Math.abs(lp - (one.trajectories[i]?.steps[j]?.samplerLogprobs[n] ?? Number.NaN)))
    assert.ok(gap < 1e-5, `sampler log-probs differ by ${gap}`)
  })
})

describe('forking a run', () => {
  it('at iteration k: its checkpoint with optimizer state and KL reference; the fork goes on at k + 1', async () => {
    const config = { ...microConfig('grpo'), fork: { run: 'rows-source', at: 'base' as const } }
    const { run, plan } = await acts.planRun({
      runId: 'fork-source',
      config: { ...config, stage2: { ...config.stage2, iterations: 2 } },
    })
    const start = await acts.fork({ run })
    const it0 = await iterateMicro(acts, run, plan, 0, {
      acting: start.acting,
      reference: start.reference,
      analyzer: null,
    })

    const branch = {
      ...microConfig('grpo'),
      stage2: { ...config.stage2, iterations: 2 },
      fork: { run: 'fork-source', at: { iteration: 0 } },
    }
    const { run: forkRun } = await acts.planRun({ runId: 'fork-branch', config: branch })
    const forked = await acts.fork({ run: forkRun })
    assert.equal(forked.iteration, 1)
    assert.equal(forked.acting.sha256, it0.updated.checkpoint.sha256)
    assert.equal(forked.reference.sha256, start.reference.sha256)
    assert.ok(forked.acting.prefix.startsWith(`runs/fork-branch/`), forked.acting.prefix)
    assert.ok(await store.head(`${forked.acting.prefix}optimizer.safetensors`), 'the optimizer state is copied')
    assert.equal((await acts.fork({ run: forkRun })).reused, true)
    // a fork of a fork finds the base among the first fork's copies
    const again = { ...microConfig('grpo'), fork: { run: 'fork-source', at: 'base' as const } }
    const { run: againRun } = await acts.planRun({ runId: 'fork-of-fork', config: again })
    assert.equal((await acts.fork({ run: againRun })).base.sha256, start.base.sha256)
  })

  it('refuses an unknown run at planRun and a fork point the run does not have', async () => {
    const unknown = { ...microConfig('grpo'), fork: { run: 'no-such-run', at: 'base' as const } }
    await assert.rejects(
      acts.planRun({ runId: 'fork-unknown', config: unknown }),
      /fork\.run: no run named no-such-run/,
    )
    const late = { ...microConfig('grpo'), fork: { run: 'fork-source', at: { iteration: 1 } } }
    const { run } = await acts.planRun({
      runId: 'fork-late',
      config: { ...late, stage2: { ...late.stage2, iterations: 3 } },
    })
    await assert.rejects(
      acts.fork({ run }),
      (e: Error) =>
        /ForkError/.test(String((e as { type?: string }).type)) && /has not finished iteration 1/.test(e.message),
    )
    const noStage1 = { ...microConfig('seed'), fork: { run: 'fork-source', at: 'stage1' as const } }
    const { run: r2 } = await acts.planRun({ runId: 'fork-no-stage1', config: noStage1 })
    await assert.rejects(acts.fork({ run: r2 }), /has no Stage 1/)
  })
})
