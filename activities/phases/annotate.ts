// Annotate: the base policy rolls out Stage 1's train tasks and the environment's oracle annotates every
// trajectory, writing the Stage 1 trajectories and the annotations (the skill library). Stage 1 does this
// before its SFT (annotation below); rows that read the library but start from the base run it alone.

import type { RunConfig } from '../../seed/config.ts'
import type { ArtifactStore } from '../../store/artifact-store.ts'
import { keys } from '../../store/keys.ts'
import type { CheckpointRef, RunRef } from '../contracts.ts'
import { annotateStage1, type Policy } from '../core/index.ts'
import { encodeJsonlGz } from '../jsonl.ts'
import { heartbeat, type PhaseDef, scopeOf } from '../phase-activity.ts'

/** Stage 1's annotation of the base policy's rollouts, written to the store. */
export async function annotation(
  store: ArtifactStore,
  run: RunRef,
  config: RunConfig,
  policy: Policy,
  attempt: number,
) {
  const annotated = await annotateStage1(policy, config)
  heartbeat()
  const trajectories = await store.put(
    keys.sftTrajectories(run.runId, 0, attempt),
    encodeJsonlGz(annotated.trajectories),
  )
  const annotations = await store.put(
    keys.sftAnnotations(run.runId, attempt),
    Buffer.from(annotated.skills.map((s) => `${JSON.stringify(s)}\n`).join(''), 'utf8'),
  )
  return {
    trajectories: annotated.trajectories,
    skills: annotated.skills,
    outputs: { trajectories, annotations },
    stats: { rolloutSuccess: annotated.rollout.successRate, annotated: annotated.skills.filter((s) => s.ok).length },
  }
}

export const annotatePhase: PhaseDef<{ run: RunRef; base: CheckpointRef }, RunConfig> = {
  describe: () => 'annotate',
  needs: (c) => c,
  async plan({ run, base }, config, read) {
    return {
      scope: scopeOf(run, 'annotate', 0),
      inputs: { base: base.sha256 },
      async compute({ store, attempt }) {
        const { policy } = await read.policy(base)
        const { outputs, stats } = await annotation(store, run, config, policy, attempt)
        return { outputs, stats }
      },
    }
  },
}
