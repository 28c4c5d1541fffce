// Warm-start: the run's base checkpoint by behaviour cloning on expert demonstrations (the run's `prepare` when
// it has warm-start settings): the built-in model from scratch, or an imported model from its folder's weights
// (read as the import phase reads it; the folder's file hashes are then inputs of this phase too).
import { resolve } from 'node:path'
import { readDemonstrationsFile } from '../../compute/demonstrations-file.ts'
import { poolLossStats, type WarmstartInput, warmstart } from '../../compute/index.ts'
import { warmstartSettings } from '../../compute/warmstart.ts'
import type { RunRef, StageSummary } from '../../records/contracts.ts'
import { fatal } from '../../records/failures.ts'
import type { RunConfig } from '../../seed/config.ts'
import { keys } from '../../store/keys.ts'
import { heartbeat, type PhaseDef, scopeOf } from '../phase-activity.ts'
import { checkpointOf, MODEL_FILE, numericStats, writeCheckpoint } from '../phase-io.ts'
import { folderHashes, readImportedFolder } from './import.ts'

const needs = (c: RunConfig) => {
  if (!c.warmstart) throw fatal('warmstart: the run has no warm-start settings', 'InvalidRunConfig')
  return { ...warmstartSettings(c, c.warmstart), model: c.model }
}

export const warmstartPhase: PhaseDef<{ run: RunRef }, ReturnType<typeof needs>, StageSummary> = {
  describe: () => 'prepare',
  needs,
  async plan({ run }, c) {
    const { model } = c
    return {
      scope: scopeOf(run, 'warmstart', 0),
      inputs: {
        ...(model.kind === 'imported' ? await folderHashes(resolve(model.folder)) : {}),
        // a demonstrations file is an input: another file, another warm-start
        ...(c.warmstart.demonstrationsFile === undefined
          ? {}
          : { demonstrations: (await readDemonstrationsFile(c.warmstart.demonstrationsFile)).sha256 }),
      },
      async compute({ store, engine, attempt }) {
        const start: WarmstartInput['model'] =
          model.kind === 'imported'
            ? { kind: 'imported', base: await readImportedFolder(model), ...(model.lora ? { lora: model.lora } : {}) }
            : model
        // the last step's loss, with the last validation check's success once there is one
        const last: { step: number; loss?: number; successRate?: number } = { step: 0 }
        const progress = () => heartbeat({ phase: 'warmstart', steps: c.warmstart.steps, ...last })
        const r = await warmstart(engine, {
          ...c,
          model: start,
          onDemonstration: (step, steps) => heartbeat({ phase: 'demonstrations', step, steps }),
          onStep: (step, loss) => {
            Object.assign(last, { step, loss })
            progress()
          },
          onCheck: (check) => {
            Object.assign(last, { step: check.step, successRate: check.successRate })
            progress()
          },
        })
        const stats = { ...numericStats(r.stats, ['lastLoss']), ...poolLossStats(r.stats.pools) }
        const key = keys.baseCheckpoint(run.runId, MODEL_FILE, attempt)
        return { outputs: await writeCheckpoint(store, key, r.checkpoint), stats }
      },
    }
  },
  result: (summary, outputs) => ({ ...summary, checkpoint: checkpointOf(outputs, 'prepare') }),
}
