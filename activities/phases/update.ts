// Update: the row's loss (compute/plan.ts lossTerms) over the rescored samples, one AdamW pass of
// mini-batches from π_k's weights and optimizer state → π_{k+1}, written with its optimizer state; with
// `stage2.stage1Mix`, then the mixed-in Stage-1 steps (compute/stage1-mix.ts).

import { LORA_SEED, poolLossStats, toCheckpoint, update, withLora } from '../../compute/index.ts'
import { lossTerms } from '../../compute/plan.ts'
import { stage1Mix } from '../../compute/stage1-mix.ts'
import { mixSeed } from '../../envs/rng.ts'
import type { UpdateInput, UpdateSummary } from '../../records/contracts.ts'
import { fatal } from '../../records/failures.ts'
import { decodeRescore } from '../../records/rescore-format.ts'
import type { RunConfig } from '../../seed/config.ts'
import { getExpected } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import { heartbeat, type PhaseDef, scopeOf } from '../phase-activity.ts'
import { checkpointOf, MODEL_FILE, numericStats, writeCheckpoint } from '../phase-io.ts'

/** The streams of `padToMiniBatch`'s copies and of the mixed-in Stage-1 steps within the iteration's seed. */
const PAD_STREAM = 0x9ad
const MIX_STREAM = 0x31c

const needs = (c: RunConfig) => ({
  terms: lossTerms(c.algorithm),
  settings: c.stage2,
  seed: c.seed,
  env: c.env,
  prompt: c.prompt,
  warmstart: c.warmstart,
  ...(c.model.lora ? { lora: c.model.lora } : {}),
})

export const updatePhase: PhaseDef<UpdateInput, ReturnType<typeof needs>, UpdateSummary> = {
  describe: () => 'update',
  needs,
  async plan({ run, iteration, snapshot, rollouts, rescore: scoredRef }, needed, read) {
    const { terms, settings, lora, seed } = needed
    const inputs: Record<string, string> = { snapshot: snapshot.sha256, rescore: scoredRef.sha256 }
    rollouts.forEach((r, i) => {
      inputs[`rollouts/${i}`] = r.sha256
    })
    const annotations = settings.stage1Mix ? await read.annotations(run) : null
    if (annotations) inputs.annotations = annotations.sha256
    return {
      scope: scopeOf(run, 'update', 0, iteration),
      inputs,
      async compute({ store, attempt }) {
        const snap = await read.snapshot(snapshot)
        const samples = decodeRescore(await getExpected(store, scoredRef.key, scoredRef.sha256), scoredRef.key)
        const { policy, optimizer } = await read.policy(snap.acting, { resident: true })
        // fresh adapters on a checkpoint without them (the first LoRA update) start a fresh optimizer state
        const fresh = lora ? await withLora(policy, lora, mixSeed(seed, iteration, LORA_SEED)) : false
        const adapter = policy.model.lora
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
          onProgress: (step, steps, loss) => heartbeat({ phase: 'update', step, steps, loss }),
        })
        const stats = numericStats(updated.metrics, ['loss', 'pgLoss', 'gradNorm'])
        for (const name of ['kl', 'entropy', 'opdLoss'] as const) {
          const v = updated.metrics[name]
          if (v !== null && !Number.isFinite(v)) throw fatal(`${name} is ${v}`, 'NonFiniteLossError')
        }
        if (settings.stage1Mix && annotations) {
          const steps = settings.stage1Mix.steps
          const mixed = await stage1Mix(policy, {
            env: needed.env,
            prompt: needed.prompt,
            settings: settings.stage1Mix,
            annotations: annotations.records,
            warmstart: needed.warmstart,
            seed: mixSeed(seed, iteration, MIX_STREAM),
            onStep: (step, loss) => heartbeat({ phase: 'stage1 mix', step, steps, loss }),
          })
          for (const [name, value] of Object.entries({
            ...numericStats(mixed, ['firstLoss', 'lastLoss']),
            ...poolLossStats(mixed.pools),
          }))
            stats[`mix${name.charAt(0).toUpperCase()}${name.slice(1)}`] = value
        }
        const key = keys.checkpoint(run.runId, iteration, MODEL_FILE, attempt)
        const outputs = await writeCheckpoint(store, key, await toCheckpoint(policy), updated.optimizerState)
        // the next iteration on this worker takes the policy as the store now holds it: the mixed-in steps
        // restarted the optimizer, so the trainer gets the state that was written
        if (settings.stage1Mix && annotations) await policy.trainer.loadOptimizerState(updated.optimizerState)
        await read.keep(checkpointOf(outputs, 'update'), policy)
        return { outputs, stats }
      },
    }
  },
  result: (summary, outputs) => ({ ...summary, checkpoint: checkpointOf(outputs, 'update') }),
}
