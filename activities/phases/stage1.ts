// Stage 1: the base policy's rollouts annotated by the oracle (annotate.ts), then supervised fine-tuning on
// acting and skill-writing pairs → π_0, the start checkpoint and KL reference of the SEED rows.

import { LORA_SEED, poolLossStats, toCheckpoint, trainStage1, withLora } from '../../compute/index.ts'
import { mixSeed } from '../../envs/rng.ts'
import type { CheckpointRef, RunRef, StageSummary } from '../../records/contracts.ts'
import type { RunConfig } from '../../seed/config.ts'
import { keys } from '../../store/keys.ts'
import { heartbeat, type PhaseDef, scopeOf } from '../phase-activity.ts'
import { checkpointOf, MODEL_FILE, numericStats, writeCheckpoint } from '../phase-io.ts'
import { annotation } from './annotate.ts'

export const stage1Phase: PhaseDef<{ run: RunRef; base: CheckpointRef }, RunConfig, StageSummary> = {
  describe: () => 'stage1',
  needs: (c) => c,
  async plan({ run, base }, config, read) {
    return {
      scope: scopeOf(run, 'sft', 0),
      inputs: { base: base.sha256 },
      async compute({ store, attempt }) {
        const { policy } = await read.policy(base)
        const annotated = await annotation(store, run, config, policy, attempt)
        if (config.model.lora) await withLora(policy, config.model.lora, mixSeed(config.seed, LORA_SEED))
        const trained = await trainStage1(policy, annotated, config, (step, loss) =>
          heartbeat({ phase: 'stage1', step, steps: config.stage1.steps, loss }),
        )
        const stats = {
          ...numericStats(trained, ['firstLoss', 'lastLoss']),
          ...poolLossStats(trained.pools),
          ...annotated.stats,
        }
        const key = keys.sftCheckpoint(run.runId, MODEL_FILE, attempt)
        const written = await writeCheckpoint(store, key, await toCheckpoint(policy))
        // kept as the store holds it (no optimizer state is stored with Stage 1's checkpoint: fresh moments)
        await policy.trainer.loadOptimizerState()
        await read.keep(checkpointOf(written, 'stage1'), policy)
        return { outputs: { ...written, ...annotated.outputs }, stats }
      },
    }
  },
  result: (summary, outputs) => ({ ...summary, checkpoint: checkpointOf(outputs, 'stage1') }),
}
