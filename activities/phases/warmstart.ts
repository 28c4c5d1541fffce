// Warm-start: the built-in model's base checkpoint, behaviour cloning from scratch (the run's `prepare` when
// its model is the built-in one).
import type { BuiltinModelConfig, RunConfig } from '../../seed/config.ts'
import { keys } from '../../store/keys.ts'
import type { RunRef, StageSummary } from '../contracts.ts'
import { warmstart } from '../core/index.ts'
import { fatal } from '../failures.ts'
import { heartbeat, type PhaseDef, scopeOf } from '../phase-activity.ts'
import { checkpointOf, MODEL_FILE, numericStats, writeCheckpoint } from '../phase-io.ts'

const needs = (c: RunConfig) => {
  if (c.model.kind !== 'builtin' || !c.warmstart)
    throw fatal('warmstart: the built-in model needs warm-start settings', 'InvalidRunConfig')
  return {
    env: c.env,
    model: c.model as BuiltinModelConfig,
    prompt: c.prompt,
    warmstart: c.warmstart,
    analyzer: c.stage2.analyzer,
    evaluation: c.evaluation,
    seed: c.seed,
  }
}

export const warmstartPhase: PhaseDef<{ run: RunRef }, ReturnType<typeof needs>, StageSummary> = {
  describe: () => 'prepare',
  needs,
  async plan({ run }, c) {
    return {
      scope: scopeOf(run, 'warmstart', 0),
      inputs: {},
      async compute({ store, engine, attempt }) {
        const r = await warmstart(engine, {
          ...c,
          onCheck: (check) =>
            heartbeat({
              phase: 'warmstart',
              step: check.step,
              steps: c.warmstart.steps,
              successRate: check.successRate,
            }),
        })
        const stats = numericStats(r.stats, ['lastLoss'])
        const key = keys.baseCheckpoint(run.runId, MODEL_FILE, attempt)
        return { outputs: await writeCheckpoint(store, key, r.checkpoint), stats }
      },
    }
  },
  result: (summary, outputs) => ({ ...summary, checkpoint: checkpointOf(outputs, 'prepare') }),
}
