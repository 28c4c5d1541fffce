import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { mulberry32 } from '../../envs/rng.ts'
import { initWeights } from '../../policy/init.ts'
import { loadCheckpoint, saveCheckpoint } from '../../records/checkpoint-store.ts'
import { decodeJsonlGz, encodeJsonlGz } from '../../records/jsonl.ts'
import { FsArtifactStore } from '../../store/fs-store.ts'
import { keys } from '../../store/keys.ts'
import { SMALL } from '../policy/small-config.ts'

describe('checkpoints and records in the store', () => {
  it('saves and loads a checkpoint folder with its optimizer state', async () => {
    const root = await mkdtemp(join(tmpdir(), 'seedflow-ck-'))
    try {
      const store = new FsArtifactStore(root)
      const weights = initWeights(SMALL, mulberry32(3))
      const prefix = keys.checkpoint('r1', 0, 'config.json').replace(/config\.json$/, '')
      const optimizer = {
        step: 7,
        tensors: {
          'model.norm.weight.exp_avg': new Float32Array(32).fill(0.5),
          'model.norm.weight.exp_avg_sq': new Float32Array(32).fill(2),
        },
      }
      const ref = await saveCheckpoint(
        store,
        prefix,
        { config: SMALL, weights, eosIds: [0], tokenizerJson: { version: '1.0' } },
        optimizer,
      )
      assert.equal(ref.prefix, 'runs/r1/iterations/0000/checkpoint/')
      assert.equal(ref.sha256, (await store.head(`${prefix}model.safetensors`))?.sha256)
      const loaded = await loadCheckpoint(store, ref)
      assert.deepEqual(loaded.checkpoint.config, SMALL)
      for (const [name, w] of weights) assert.deepEqual(loaded.checkpoint.weights.get(name), w)
      assert.equal(loaded.optimizer?.step, 7)
      assert.deepEqual(
        loaded.optimizer?.tensors['model.norm.weight.exp_avg_sq'],
        optimizer.tensors['model.norm.weight.exp_avg_sq'],
      )
      assert.deepEqual(loaded.checkpoint.tokenizerJson, { version: '1.0' })
    } finally {
      await rm(root, { recursive: true, force: true })
    }
  })

  it('round-trips gzipped JSON lines and names the bad line', () => {
    const records = [{ a: 1 }, { text: 'line\nbreak', ids: [1, 2, 3] }]
    assert.deepEqual(decodeJsonlGz(encodeJsonlGz(records), 'x'), records)
    assert.throws(
      () => decodeJsonlGz(new Uint8Array([1, 2, 3]), 'rollouts/0000.jsonl.gz'),
      /rollouts\/0000\.jsonl\.gz: not gzip data/,
    )
  })
})
