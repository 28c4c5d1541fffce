// The run config's `engine` settings (recomputed layers, frozen decode weights, micro-batches) reach the policy a phase
// loads: loadPolicy lays the model out with them, decode batches that name no weights follow the model, and
// adapters put on later keep the layout.
import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { loadPolicy, withLora } from '../../compute/index.ts'
import { createLocalEngine, type Engine, type Feeds } from '../../engine/index.ts'
import { mulberry32 } from '../../envs/rng.ts'
import { generate } from '../../policy/generate.ts'
import { ENGINE_DEFAULTS, parseRunConfig, runConfig } from '../../seed/config.ts'
import { smokeSokobanPreset } from '../../seed/presets/smoke.ts'
import { servedCheckpoint } from '../serve/served-checkpoint.ts'

const engine = createLocalEngine({ threads: 1 })
after(() => engine.close())

/** The engine, recording the feed names of every run. */
function recording(inner: Engine): { engine: Engine; feeds: string[][] } {
  const feeds: string[][] = []
  const run: Engine['run'] = (handle, f: Feeds, options) => {
    feeds.push(Object.keys(f))
    return inner.run(handle, f, options)
  }
  return { engine: { ...inner, run }, feeds }
}

const checkpoint = () => servedCheckpoint({ chat: false })

describe('engine settings', () => {
  it('default to layers kept and decode weights fed, and refuse frozen decoding with LoRA', () => {
    const { engine: _preset, ...base } = smokeSokobanPreset()
    assert.deepEqual(runConfig(base).engine, { recomputeLayers: false, decodeWeights: 'inputs' })
    assert.deepEqual(runConfig({ ...base, engine: { recomputeLayers: true } }).engine, {
      recomputeLayers: true,
      decodeWeights: 'inputs',
    })
    const refused = parseRunConfig({ ...base, engine: { decodeWeights: 'frozen' }, model: { ...base.model, lora: {} } })
    assert.ok(!refused.ok)
    assert.ok(
      refused.problems.some((p) => p.startsWith('engine.decodeWeights') && p.includes('with model.lora')),
      refused.problems.join('\n'),
    )
  })

  it('lay out the loaded policy: recomputed layers, frozen decoding by default, kept when adapters are added', async () => {
    const fed = loadPolicy(engine, checkpoint())
    assert.deepEqual(fed.model.graphOptions, {})
    assert.equal(fed.model.decodeWeights, ENGINE_DEFAULTS.decodeWeights)

    const spy = recording(engine)
    const settings = { recomputeLayers: true, decodeWeights: 'frozen' as const, microBatchSize: 2 }
    const frozen = loadPolicy(spy.engine, checkpoint(), { settings })
    assert.deepEqual(frozen.model.graphOptions, { recomputeLayers: true })
    assert.equal(frozen.trainer.microBatchRows, 2, 'steps run in micro-batches of engine.microBatchSize')
    const sample = (p: typeof fed) =>
      generate(p.model, [[3, 9, 4, 1]], { maxNewTokens: 6, temperature: 1, eosIds: [], rngs: [mulberry32(1)] })
    const [a, b] = [await sample(fed), await sample(frozen)]
    assert.deepEqual(b.sequences[0]?.tokens, a.sequences[0]?.tokens)
    assert.ok(spy.feeds.length >= 6, `${spy.feeds.length} decode runs`)
    for (const names of spy.feeds)
      assert.ok(!names.includes('model.embed_tokens.weight'), `a frozen decode run was fed weights: ${names}`)

    await withLora(frozen, { rank: 2, alpha: 4, dropout: 0, targets: ['q_proj'] }, 3)
    assert.deepEqual(frozen.model.graphOptions, { recomputeLayers: true })
    assert.equal(frozen.trainer.microBatchRows, 2)
    assert.equal(frozen.model.decodeWeights, 'frozen')
  })
})
