// Evaluate: one checkpoint (the base, Stage 1 or the end of iteration k: a typed target) on one held-out split
// of the run's evaluations (slot 0: the periodic `evaluation.split`; slot n: the n-th of `evaluation.splits`,
// at the start checkpoints and the end). The per-task records go to the stored evaluation; the workflow gets
// the summary.

import { evaluate } from '../../compute/index.ts'
import { evaluationSeed, evaluationSkills } from '../../compute/plan.ts'
import type { EvaluateInput, EvaluationTarget, RunRef } from '../../records/contracts.ts'
import { targetLabel } from '../../records/evaluation-target.ts'
import { fatal } from '../../records/failures.ts'
import { ALGORITHMS } from '../../seed/algorithms.ts'
import { envLabel, type RunConfig } from '../../seed/config.ts'
import { putJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import { heartbeat, type PhaseDef, scopeOf } from '../phase-activity.ts'

/** An evaluate input from a worker of before typed targets: `iteration` −1 with label `base` or `stage 1`. */
interface LegacyEvaluateInput {
  run: RunRef
  iteration: number
  label: string
  checkpoint: EvaluateInput['checkpoint']
}

/** The target of an input, typed or from before typed targets. */
export function targetOf(input: EvaluateInput | LegacyEvaluateInput): EvaluationTarget {
  if ('target' in input) return input.target
  if (input.iteration >= 0) return { kind: 'iteration', iteration: input.iteration }
  return input.label === 'base' ? { kind: 'base' } : { kind: 'stage1' }
}

/** The split, seeds and tasks of one evaluation slot. */
function slotOf(c: RunConfig['evaluation'], slot: number) {
  if (slot === 0) return { split: c.split, seedStart: c.seedStart, tasks: c.tasks, extra: false }
  const s = c.splits?.[slot - 1]
  if (!s)
    throw fatal(
      `evaluation slot ${slot}: the configuration has ${c.splits?.length ?? 0} evaluation.splits`,
      'InvalidRunConfig',
    )
  return { split: s.split, seedStart: s.seedStart ?? 0, tasks: s.tasks, extra: true }
}

const needs = (c: RunConfig, input: EvaluateInput) => ({
  seed: c.seed,
  env: c.env,
  algorithm: c.algorithm,
  prompt: c.prompt,
  evaluation: { temperature: c.evaluation.temperature, maxEnvSteps: c.evaluation.maxEnvSteps },
  slot: slotOf(c.evaluation, input.slot ?? 0),
})

export const evaluatePhase: PhaseDef<EvaluateInput, ReturnType<typeof needs>> = {
  describe: (input) => `evaluate ${targetLabel(targetOf(input))}${input.slot ? ` (slot ${input.slot})` : ''}`,
  needs,
  async plan(input, c, read) {
    const { run, checkpoint } = input
    const slot = input.slot ?? 0
    const target = targetOf(input)
    const label = targetLabel(target)
    const library = ALGORITHMS[c.algorithm].evaluationSkill === 'library' ? await read.library(run, c.algorithm) : null
    const split = c.slot.extra ? c.slot.split : undefined
    // before Stage 2 there are two run-level evaluations per slot: even shards the base checkpoint, odd Stage 1's
    const scope =
      target.kind === 'iteration'
        ? scopeOf(run, 'evaluate', slot, target.iteration)
        : scopeOf(run, 'evaluate', 2 * slot + (target.kind === 'base' ? 0 : 1))
    return {
      scope,
      inputs: { checkpoint: checkpoint.sha256, ...(library ? { library: library.sha256 } : {}) },
      async compute({ store, attempt }) {
        const { policy } = await read.policy(checkpoint)
        const e = c.evaluation
        const seed = evaluationSeed(c.seed)
        const r = await evaluate(policy, {
          env: c.env,
          split: c.slot.split,
          seedStart: c.slot.seedStart,
          tasks: c.slot.tasks,
          temperature: e.temperature,
          maxEnvSteps: e.maxEnvSteps,
          prompt: c.prompt,
          seed,
          ...(library ? { skills: evaluationSkills(library.skills, c.slot.tasks, seed) } : {}),
          onProgress: (finished, episodes) => heartbeat({ phase: 'evaluate', step: finished, steps: episodes }),
        })
        const key =
          target.kind === 'iteration'
            ? keys.evaluation(run.runId, target.iteration, attempt, split)
            : keys.stageEvaluation(run.runId, target.kind, attempt, split)
        const info = await putJson(store, key, {
          label,
          target,
          iteration: target.kind === 'iteration' ? target.iteration : -1,
          checkpoint,
          env: envLabel(c.env),
          split: c.slot.split,
          seeds: { from: c.slot.seedStart, to: c.slot.seedStart + c.slot.tasks },
          temperature: e.temperature,
          ...r,
        })
        const a = r.aggregates
        return {
          outputs: { evaluation: info },
          stats: {
            success: r.successRate,
            standardError: r.standardError,
            ...(a.success.low !== null && a.success.high !== null
              ? { successLow: a.success.low, successHigh: a.success.high }
              : {}),
            macroSuccess: r.macroSuccessRate,
            meanScore: r.meanScore,
            meanLength: r.meanLength,
            invalidRate: r.invalidRate,
            failedEpisodes: r.failedEpisodes,
            tasks: r.tasks,
            seconds: r.seconds,
          },
        }
      },
    }
  },
}
