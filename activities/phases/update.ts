// Update: the row's loss (activities/core/plan.ts lossTerms) over the rescored samples, one AdamW pass of
// mini-batches from π_k's weights and optimizer state → π_{k+1}, written with its optimizer state.

import { mixSeed } from '../../envs/rng.ts'
import type { RunConfig } from '../../seed/config.ts'
import { getExpected } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import type { UpdateInput, UpdateSummary } from '../contracts.ts'
import { LORA_SEED, toCheckpoint, update, withLora } from '../core/index.ts'
import { lossTerms } from '../core/plan.ts'
import { fatal } from '../failures.ts'
import { type PhaseDef, scopeOf } from '../phase-activity.ts'
import { checkpointOf, MODEL_FILE, numericStats, writeCheckpoint } from '../phase-io.ts'
import { decodeRescore } from '../rescore-format.ts'

/** The stream of `padToMiniBatch`'s copies within the iteration's seed. */
const PAD_STREAM = 0x9ad

const needs = (c: RunConfig) => ({
  terms: lossTerms(c.algorithm),
  settings: c.stage2,
  seed: c.seed,
  ...(c.model.lora ? { lora: c.model.lora } : {}),
})

export const updatePhase: PhaseDef<UpdateInput, ReturnType<typeof needs>, UpdateSummary> = {
  describe: () => 'update',
  needs,
  async plan({ run, iteration, snapshot, rollouts, rescore: scoredRef }, { terms, settings, lora, seed }, read) {
    const inputs: Record<string, string> = { snapshot: snapshot.sha256, rescore: scoredRef.sha256 }
    rollouts.forEach((r, i) => {
      inputs[`rollouts/${i}`] = r.sha256
    })
    return {
      scope: scopeOf(run, 'update', 0, iteration),
      inputs,
      async compute({ store, attempt }) {
        const snap = await read.snapshot(snapshot)
        const samples = decodeRescore(await getExpected(store, scoredRef.key, scoredRef.sha256), scoredRef.key)
        const { policy, optimizer } = await read.policy(snap.acting)
        // fresh adapters on a checkpoint without them (the first LoRA update) start a fresh optimizer state
        const fresh = lora ? withLora(policy, lora, mixSeed(seed, iteration, LORA_SEED)) : false
        const adapter = policy.model.lora?.config
        if (!lora && adapter)
          throw fatal(
            `checkpoint ${snap.acting.prefix} carries a LoRA adapter (rank ${adapter.rank}, alpha ${adapter.alpha}, ` +
              `targets ${adapter.targets.join(', ')}) but the run config has no model.lora: set it to the adapter's`,
            'CorePhaseError',
          )
        const updated = await update(policy, {
          samples,
          terms,
          settings,
          seed: mixSeed(seed, iteration, PAD_STREAM),
          ...(optimizer && !fresh ? { optimizerState: optimizer } : {}),
        })
        const stats = numericStats(updated.metrics, ['loss', 'pgLoss', 'gradNorm'])
        for (const name of ['kl', 'entropy', 'opdLoss'] as const) {
          const v = updated.metrics[name]
          if (v !== null && !Number.isFinite(v)) throw fatal(`${name} is ${v}`, 'NonFiniteLossError')
        }
        const key = keys.checkpoint(run.runId, iteration, MODEL_FILE, attempt)
        return { outputs: await writeCheckpoint(store, key, toCheckpoint(policy), updated.optimizerState), stats }
      },
    }
  },
  result: (summary, outputs) => ({ ...summary, checkpoint: checkpointOf(outputs, 'update') }),
}
