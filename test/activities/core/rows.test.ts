// One micro iteration per algorithm row: which phases ran and which loss terms were on and non-zero.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { runIteration } from '../../../activities/core/index.ts'
import { createLocalEngine } from '../../../engine/index.ts'
import type { Checkpoint } from '../../../policy/checkpoint.ts'
import { ALGORITHM_NAMES, ALGORITHMS } from '../../../seed/index.ts'
import { microCheckpoint, microConfig, microPolicy } from './micro.ts'

const engine = createLocalEngine({ threads: 1 })
after(() => engine.close())
let checkpoint: Checkpoint
before(async () => {
  checkpoint = await microCheckpoint(engine)
})
const LIBRARY = ['Push the box X toward the target O; never into a corner.', 'Walk behind the box, then push.']

describe('one iteration per algorithm row', () => {
  for (const name of ALGORITHM_NAMES) {
    const row = ALGORITHMS[name]
    it(`${name}: ${row.rl ? row.phases.join(' → ') : 'no RL iterations'}`, async () => {
      const config = microConfig(name)
      const run = () =>
        runIteration(
          {
            policy: microPolicy(engine, checkpoint),
            reference: microPolicy(engine, checkpoint),
            stage1: microPolicy(engine, checkpoint),
          },
          { config, iteration: 0, library: LIBRARY },
        )
      if (!row.rl) {
        await assert.rejects(run, /has no RL iterations/)
        return
      }
      const r = await run()
      assert.deepEqual(r.phases, row.phases)
      assert.equal(r.analyze !== null, (row.phases as readonly string[]).includes('analyze'))
      const u = r.update
      assert.ok(u.miniBatches >= 2)
      assert.ok(u.kl !== null && u.kl > 0, `KL ${u.kl} (0 on the first mini-batch, then > 0)`)
      assert.ok(u.entropy !== null && u.entropy > 0)
      if (!row.loss?.opd) {
        assert.equal(r.rescore.teacherSamples, 0)
        assert.equal(u.opdLoss, null)
      }
      if (name === 'seed-library') {
        assert.equal(r.rescore.teacherSamples, r.rescore.samples)
        assert.ok(u.opdGateMean !== null && u.opdGateMean > 0)
        assert.ok(u.opdLoss !== null && u.opdLoss !== 0)
      }
      if (name === 'skill-grpo') assert.equal(r.rollout.truncation.blockDropped, 0)
    })
  }
})
