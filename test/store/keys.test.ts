import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { InvalidKeyError } from '../../store/errors.ts'
import { InvalidRunIdError, keys } from '../../store/keys.ts'

describe('artifact keys', () => {
  it('lays out a run as docs/design.md §5.1 does', () => {
    assert.equal(keys.runRecord('r1'), 'runs/r1/run.json')
    assert.equal(keys.baseCheckpoint('r1', 'model.safetensors'), 'runs/r1/base/checkpoint/model.safetensors')
    assert.equal(keys.rollouts('r1', 3, 2), 'runs/r1/iterations/0003/rollouts/0002.jsonl.gz')
    assert.equal(keys.phaseManifest('r1', 3, 'rescore', 0), 'runs/r1/iterations/0003/rescore/0000.manifest.json')
    assert.equal(
      keys.checkpoint('r1', 12, 'optimizer.safetensors'),
      'runs/r1/iterations/0012/checkpoint/optimizer.safetensors',
    )
    assert.equal(keys.iterationManifest('r1', 0), 'runs/r1/iterations/0000/manifest.json')
    assert.equal(keys.evaluation('r1', 5), 'runs/r1/eval/0005.json')
    assert.equal(keys.stagePhaseManifest('r1', 'sft', 0), 'runs/r1/sft/0000.manifest.json')
    assert.equal(keys.sftReply('r1', 'ab'.repeat(32)), `runs/r1/sft/replies/${'ab'.repeat(32)}.json`)
    assert.throws(() => keys.sftReply('r1', '../x'), RangeError)
    assert.equal(keys.retentionRecord('r1', 4), 'runs/r1/retention/0004.json')
    assert.equal(keys.hyperparameterChange('r1', 0), 'runs/r1/hyperparameters/0000.json')
  })

  it('puts a recomputed attempt beside the first one', () => {
    assert.equal(keys.rollouts('r1', 3, 2, 1), 'runs/r1/iterations/0003/rollouts/0002.attempt-1.jsonl.gz')
    assert.equal(
      keys.phaseManifest('r1', 3, 'update', 0, 2),
      'runs/r1/iterations/0003/update/0000.attempt-2.manifest.json',
    )
    assert.equal(keys.checkpoint('r1', 3, 'config.json', 1), 'runs/r1/iterations/0003/checkpoint.attempt-1/config.json')
    assert.equal(keys.metrics('r1', 3, 1), 'runs/r1/iterations/0003/metrics.attempt-1.json')
    assert.equal(keys.iterationManifest('r1', 3, 1), 'runs/r1/iterations/0003/manifest.attempt-1.json')
    assert.equal(
      keys.baseCheckpoint('r1', 'model.safetensors', 1),
      'runs/r1/base/checkpoint.attempt-1/model.safetensors',
    )
    assert.equal(keys.sftCheckpoint('r1', 'config.json', 2), 'runs/r1/sft/checkpoint.attempt-2/config.json')
    assert.equal(keys.sftAnnotations('r1', 1), 'runs/r1/sft/annotations.attempt-1.jsonl')
    assert.equal(keys.sftTrajectories('r1', 0, 1), 'runs/r1/sft/trajectories/0000.attempt-1.jsonl.gz')
    assert.equal(keys.snapshot('r1', 3, 1), 'runs/r1/iterations/0003/snapshot.attempt-1.json')
    assert.equal(keys.evaluation('r1', 3, 1), 'runs/r1/eval/0003.attempt-1.json')
    assert.equal(keys.stageEvaluation('r1', 'stage1', 1), 'runs/r1/eval/stage1.attempt-1.json')
    assert.throws(() => keys.rollouts('r1', 3, 2, -1), /attempt must be a non-negative integer, got -1/)
  })

  it('rejects run ids that are not one key segment', () => {
    for (const bad of ['', '..', 'a/b', 'a b', '.hidden', 'x'.repeat(129)]) {
      assert.throws(() => keys.runRecord(bad), InvalidRunIdError, bad)
    }
    assert.throws(() => keys.rollouts('r1', 10000, 0), /index must be an integer in 0\.\.9999, got 10000/)
    assert.ok(!(new InvalidRunIdError('x') instanceof InvalidKeyError))
  })
})
