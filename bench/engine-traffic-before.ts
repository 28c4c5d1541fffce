// The BEFORE side of bench/engine-traffic.ts: the tree before issue 42's trainer (commit f9489c5, checked out as a
// git worktree), whose PolicyModel held the weights as JS arrays and fed them to every score and train run, whose
// `trainStep` ran a train graph that returned every gradient and then the JS AdamW, and whose decode kept the
// weights in the engine by a fingerprint. Its modules are imported by absolute path from that tree (so this file
// type-checks here without them); engine-traffic.ts runs it as a child process:
//   git worktree add /tmp/seedflow-before f9489c5 && ln -s "$PWD/node_modules" /tmp/seedflow-before/node_modules
//   node --import tsx bench/engine-traffic-before.ts /tmp/seedflow-before main   # one JSON line
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { Engine, Feeds, ModelHandle } from '../engine/index.ts'
import { measureTraffic, type TrafficPolicy, type TrafficTree } from './engine-traffic-measure.ts'

interface OldPolicyModel {
  engine: Engine
  tokenBatch(items: unknown[], temperature: number): { B: number; T: number; feeds: Feeds; responseMask: Float64Array }
  float(dims: number[], values: ArrayLike<number>): Feeds[string]
  loadTrainModel(loss: unknown): Promise<ModelHandle>
}

/** The old tree's API, imported from `root`. */
export async function beforeTree(root: string): Promise<TrafficTree> {
  const from = (path: string) => import(resolve(root, path))
  const { createWorkerEngine } = await from('engine/index.ts')
  const { PolicyModel } = await from('policy/policy-model.ts')
  const { DecodeBatch } = await from('policy/decode-batch.ts')
  const { AdamW } = await from('engine/index.ts')
  const { trainStep, meanNll } = await from('policy/train-step.ts')
  if (typeof trainStep !== 'function' || typeof PolicyModel !== 'function')
    throw new Error(`${root} is not the tree before the trainer (no policy/train-step.ts trainStep)`)
  return {
    name: 'before',
    createWorkerEngine: (threads) => createWorkerEngine({ threads }),
    policy(engine, config, weights, lora): TrafficPolicy {
      const model: OldPolicyModel = new PolicyModel(engine, config, weights, lora ? { lora } : {})
      const optimizer = new AdamW({ weightDecay: 0.01 })
      return {
        trainFeeds(items) {
          const batch = model.tokenBatch(items, 1)
          return { ...batch.feeds, mask: model.float([batch.B, batch.T], batch.responseMask) }
        },
        trainModel: () => model.loadTrainModel(meanNll),
        async step(train, feeds) {
          return (await trainStep(model, train, feeds, optimizer, 1e-5, 1)).loss
        },
        decodeBatch: (options) => new DecodeBatch(model, options),
      }
    },
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] as string).href) {
  const [root, key] = process.argv.slice(2)
  if (!root || !key) throw new Error('usage: engine-traffic-before.ts <tree before the trainer> <model>')
  process.stdout.write(`${JSON.stringify(await measureTraffic(await beforeTree(root), key))}\n`)
}
