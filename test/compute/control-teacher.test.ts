// The `control` OPD gate (stage2.opdGate, docs/algorithm.md §6.3): each taught trajectory also gets another
// task's skill block, the rescore scores the response under it, and the update gates on t − c instead of t − s.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import {
  actorFeeds,
  actorLossBuilder,
  type Policy,
  type RolloutResult,
  rescore,
  rollout,
  type ScoredSample,
} from '../../compute/index.ts'
import { controlBlocks } from '../../compute/plan.ts'
import { createLocalEngine } from '../../engine/index.ts'
import { IO } from '../../policy/model.ts'
import { iterationMetrics } from '../../records/iteration-metrics.ts'
import { decodeRescore, encodeRescore } from '../../records/rescore-format.ts'
import { episodeSkillBlock } from '../../seed/index.ts'
import { microCheckpoint, microConfig, microPolicy, microRolloutInput, planTrajectories } from './micro.ts'

const trajectories = planTrajectories

describe('controlBlocks', () => {
  it("gives each taught trajectory the block of the one half the list ahead, never its own group's", () => {
    const ts = trajectories(4, 2)
    const blocks = ts.map((t) => `skill of task ${t.group} (${t.id})`)
    const control = controlBlocks(blocks, ts)
    // 8 taught: trajectory i takes (i + 4) mod 8, which is two groups away
    assert.deepEqual(
      control,
      ts.map((t) => blocks[(t.id + 4) % 8]),
    )
    for (const t of ts) assert.notEqual(ts[(t.id + 4) % 8]!.group, t.group)
  })

  it('steps past its own group, skips untaught trajectories, and is null where no other group has a block', () => {
    const ts = trajectories(3, 2)
    // groups 0 and 2 taught, group 1 not: taught ids 0, 1, 4, 5; half = 2
    const blocks = ts.map((t) => (t.group === 1 ? null : `block ${t.id}`))
    const control = controlBlocks(blocks, ts)
    assert.deepEqual(control, ['block 4', 'block 5', null, null, 'block 0', 'block 1'])
    // one group taught: no other task's block exists
    const single = controlBlocks(
      ts.map((t) => (t.group === 0 ? 'only' : null)),
      ts,
    )
    assert.deepEqual(single, [null, null, null, null, null, null])
    // groups of 3 with one taught trajectory each: the one ahead, not the own group
    const odd = trajectories(2, 3)
    const oneEach = controlBlocks(
      odd.map((t) => (t.id % 3 === 0 ? `g${t.group}` : null)),
      odd,
    )
    assert.deepEqual(oneEach, ['g1', null, null, 'g0', null, null])
  })
})

describe('the control gate through rescore and update', () => {
  const engine = createLocalEngine({ threads: 1 })
  after(() => engine.close())
  const config = microConfig()
  let policy: Policy
  let rolled: RolloutResult
  const budget = () => ({
    maxPromptTokens: config.prompt.maxPromptTokens,
    responseTokens: config.prompt.maxResponseTokens,
    contextLength: config.model.maxPositions,
  })
  const SKILLS = ['Push the box down first, then right.', 'Walk around the box and push it up.']
  const blocks = () => rolled.trajectories.map((t) => episodeSkillBlock(SKILLS[t.group % 2]!))
  /** The shared rollout rescored with these teacher and control blocks. */
  const rescored = (teacherBlocks: (string | null)[], controls: (string | null)[]) =>
    rescore(policy, null, {
      trajectories: rolled.trajectories,
      teacherBlocks,
      controlBlocks: controls,
      budget: budget(),
      temperature: 1,
      batchSize: 4,
    })

  before(async () => {
    policy = microPolicy(engine, await microCheckpoint(engine, config))
    rolled = await rollout(policy, microRolloutInput(config, 5))
  })

  it('scores the response under the control block: the same as the teacher where the blocks agree', async () => {
    const teacher = blocks()
    const control = controlBlocks(teacher, rolled.trajectories)
    const r = await rescored(teacher, control)
    assert.equal(r.stats.uncontrolledSamples, 0)
    for (const s of r.samples) {
      assert.ok(s.teacher && s.control && s.control.length === s.responseIds.length)
      assert.notDeepEqual(s.control, s.teacher, 'another skill, other log-probs')
    }
    // the control gap: whole-response log π_teacher − log π_control, split by the expert's actions
    const gap = (s: ScoredSample) => s.teacher!.reduce((a, t, k) => a + t - s.control![k]!, 0)
    const expert = r.samples.filter((s) => s.expert)
    assert.equal(r.stats.controlGap?.expertSamples, expert.length)
    if (expert.length > 0) {
      const mean = expert.map(gap).reduce((a, b) => a + b, 0) / expert.length
      assert.ok(Math.abs(r.stats.controlGap!.expert! - mean) < 1e-9)
    }
    // a control block equal to the teacher's scores the teacher prompt itself
    const same = await rescored(teacher, teacher)
    for (const s of same.samples) assert.deepEqual(s.control, s.teacher)
    // round trip through the rescore file, flag bit 3
    const decoded = decodeRescore(encodeRescore(r.samples), 'test')
    decoded.forEach((s, i) => {
      assert.deepEqual(s.control, r.samples[i]!.control)
      assert.deepEqual(s.teacher, r.samples[i]!.teacher)
    })
    assert.throws(() => encodeRescore([{ ...r.samples[0]!, teacher: null }]), /has control log-probs but no teacher/)
  })

  it('a sample without a control block gets no teacher signal, and is counted', async () => {
    const teacher = blocks()
    const control = teacher.map((b, id) => (id === 0 ? null : b))
    const r = await rescored(teacher, control)
    const first = r.samples.filter((s) => s.trajectory === 0)
    assert.equal(r.stats.uncontrolledSamples, first.length)
    for (const s of first) assert.equal(s.teacher, null)
    assert.equal(r.stats.teacherSamples, r.samples.length - first.length)
  })

  it('gates on the control log-probs: they change the gradient under the control gate only', async () => {
    const teacher = blocks()
    const r = await rescored(teacher, controlBlocks(teacher, rolled.trajectories))
    const terms = { kl: true, entropy: true, opd: true }
    const settings = { ...config.stage2, opdCoef: 1, opdGate: 'control' as const }
    const train = await policy.model.gradientModel(actorLossBuilder(terms, settings))
    const advantages = new Float64Array(r.samples.length).fill(0.5)
    const feeds = actorFeeds(policy, r.samples, advantages, terms, 1, 'control')
    assert.ok(feeds.control_logp, 'the control gate feeds control_logp')
    const grad = 'model.layers.0.mlp.down_proj.weight_grad'
    const run = async (control: Float32Array) => {
      const out = await engine.run(
        train,
        { ...feeds, control_logp: { ...feeds.control_logp!, data: control } },
        { kept: await policy.model.parameters.kept() },
      )
      return { loss: Number(out[IO.loss]!.data[0]), grad: Float32Array.from(out[grad]!.data as Float32Array) }
    }
    const base = await run(Float32Array.from(feeds.control_logp!.data as Float32Array))
    const lowered = await run(Float32Array.from(feeds.control_logp!.data as Float32Array, (v) => v - 3))
    assert.notDeepEqual(lowered.grad, base.grad, 'a lower control raises every gate')
    // the student gate reads no control log-probs
    assert.equal(actorFeeds(policy, r.samples, advantages, terms, 1).control_logp, undefined)
    // a sample with a teacher but no control log-probs is refused under the control gate
    const stripped = r.samples.map(({ control: _, ...s }) => s)
    assert.throws(() => actorFeeds(policy, stripped, advantages, terms, 1, 'control'), /no control ones/)
  })
})

describe('control gap metrics', () => {
  it('weighs each shard by its samples on each side', () => {
    const m = iterationMetrics({
      rescore: [
        {
          controlGapExpert: 1,
          controlGapExpertSamples: 3,
          controlGapOther: -1,
          controlGapOtherSamples: 1,
          uncontrolledSamples: 2,
        },
        {
          controlGapExpert: 3,
          controlGapExpertSamples: 1,
          controlGapOther: 0,
          controlGapOtherSamples: 0,
          uncontrolledSamples: 1,
        },
      ],
    })
    assert.equal(m['rescore/control_gap_expert'], 1.5)
    assert.equal(m['rescore/control_gap_other'], -1)
    assert.equal(m['rescore/uncontrolled_samples'], 3)
    assert.equal(iterationMetrics({ rescore: [{ samples: 4 }] })['rescore/control_gap_expert'], null)
  })
})
