// Analyze, one shard: the analyzer (π_k, or π_0 for seed-static) writes a skill for each of the shard's trajectories.

import { analyze } from '../../compute/index.ts'
import type { AnalyzeInput } from '../../records/contracts.ts'
import { fatal } from '../../records/failures.ts'
import type { RunConfig } from '../../seed/config.ts'
import { isFormatPlaceholder } from '../../seed/index.ts'
import { keys } from '../../store/keys.ts'
import { type PhaseDef, scopeOf } from '../phase-activity.ts'

const needs = (c: RunConfig) => ({ algorithm: c.algorithm, prompt: c.prompt, analyzer: c.stage2.analyzer })

export const analyzePhase: PhaseDef<AnalyzeInput, ReturnType<typeof needs>> = {
  describe: ({ shard }) => `analyze shard ${shard}`,
  needs,
  async plan({ run, iteration, shard, snapshot, rollouts }, c, read) {
    return {
      scope: scopeOf(run, 'analyze', shard, iteration),
      inputs: { snapshot: snapshot.sha256, rollouts: rollouts.sha256 },
      async compute({ store, attempt }) {
        const snap = await read.snapshot(snapshot)
        if (!snap.analyzer) {
          throw fatal(`algorithm ${c.algorithm}: the snapshot has no analyzer`, 'PhaseContractError')
        }
        const { policy } = await read.policy(snap.analyzer)
        const analyzed = await analyze(policy, {
          trajectories: await read.trajectories(rollouts),
          prompt: c.prompt,
          maxPromptTokens: c.analyzer.maxPromptTokens,
          maxAnswerTokens: c.analyzer.maxAnswerTokens,
          batchSize: 64,
        })
        const info = await store.put(
          keys.skills(run.runId, iteration, shard, attempt),
          Buffer.from(analyzed.skills.map((s) => `${JSON.stringify(s)}\n`).join(''), 'utf8'),
        )
        const ok = analyzed.skills.filter((s) => s.ok).length
        return {
          outputs: { skills: info },
          stats: {
            skills: analyzed.skills.length,
            parsed: ok,
            parse_rate: ok / Math.max(1, analyzed.skills.length),
            placeholders: analyzed.skills.filter((s) => s.ok && isFormatPlaceholder(s.skill)).length,
            truncated: analyzed.stats.truncated,
            newTokens: analyzed.stats.newTokens,
            seconds: analyzed.stats.seconds,
          },
        }
      },
    }
  },
}
