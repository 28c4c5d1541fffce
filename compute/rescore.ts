// Rescore (docs/algorithm.md §3): for every sampled response token, log π_old (the acting weights on the
// ordinary prompt), log π_ref (the KL reference on the same prompt) and, where the row has a teacher and the
// trajectory has a skill, log π_old on the skill-augmented prompt (same response tokens, appended unchanged);
// with the `control` OPD gate also log π_old on the prompt carrying another task's block (docs/algorithm.md §6.3).
import type { PolicyModel, ScoreItem } from '../policy/policy-model.ts'
import { type FitTally, tallyFits } from '../seed/index.ts'
import { blockAt, type TeacherBlock } from './plan.ts'
import type { Policy } from './policy.ts'
import { type FittedPrompt, fitPrompt, type PromptBudgetSettings } from './prompts.ts'
import type { RolloutTrajectory } from './rollout.ts'

export interface ScoredSample {
  trajectory: number
  group: number
  step: number
  promptIds: number[]
  responseIds: number[]
  valid: boolean
  /** Whether the step's action was the environment expert's (unknown for records from before it was kept). */
  expert?: boolean
  /** The trajectory's episode reward (sum of environment rewards). */
  episodeReward: number
  /** Steps in the trajectory. */
  trajectoryLength: number
  old: Float64Array
  ref: Float64Array
  /** log π_old on the teacher prompt; null where there is no teacher signal (OPD masked). */
  teacher: Float64Array | null
  /** log π_old on the control prompt (the `control` gate; set wherever `teacher` is), else null or absent. */
  control?: Float64Array | null
  /** The teacher prompt as the model saw it (under `left` truncation, its last ids: docs/algorithm.md §13). */
  teacherPromptIds: number[] | null
}

export interface RescoreInput {
  trajectories: readonly RolloutTrajectory[]
  /**
   * The block to insert into each trajectory's step prompts for the teacher (an episode-skill block, or the raw
   * hindsight block of `grpo-opsd`), one for all its steps or one per step (plan.ts `TeacherBlock`), indexed by
   * trajectory id; null or absent: no teacher for it (or for that step).
   */
  teacherBlocks?: readonly TeacherBlock[]
  /**
   * The control block of each trajectory (the `control` OPD gate, plan.ts `controlBlocks`), indexed like
   * `teacherBlocks`. When given, a sample gets a teacher signal only if its control prompt keeps its block too.
   */
  controlBlocks?: readonly (string | null)[]
  budget: PromptBudgetSettings
  /** Log-probs at this temperature (the rollout temperature, 1.0 in training). */
  temperature: number
  /** Items per score run. */
  batchSize: number
  /** Called after each score run with the items scored so far and the items to score (old, ref, teacher, control). */
  onProgress?: (scored: number, items: number) => void
}

/** A per-response mean over samples of expert actions and over the others (null where a side has none). */
export interface SideMeans {
  expert: number | null
  expertSamples: number
  other: number | null
  otherSamples: number
}

export interface RescoreStats {
  samples: number
  teacherSamples: number
  /** Teacher prompts: how many lost history (or leftmost tokens), how many lost their block (no OPD for that sample). */
  teacherTruncation: FitTally
  /** Largest |log π_old − sampler log-prob| over all tokens: 0 up to float rounding when graphs agree. */
  maxSamplerGap: number
  /**
   * log π_teacher − log π_old of whole sampled responses, averaged over the teacher samples whose action was the
   * environment expert's and over the others (a skill that carries hindsight raises the first and lowers the
   * second); null where there is no such sample.
   */
  teacherGap: SideMeans
  /** With control blocks: log π_teacher − log π_control, averaged like `teacherGap`; else null. */
  controlGap: SideMeans | null
  /** Samples whose teacher prompt kept its block but that have no control (no other group's block, or it was dropped). */
  uncontrolledSamples: number
  seconds: number
}

export interface RescoreResult {
  samples: ScoredSample[]
  stats: RescoreStats
}

/**
 * Scores every step sample under `policy` (old, teacher) and `reference` (ref; the policy itself when null,
 * which is the first iteration of a row whose reference is its start checkpoint).
 */
export async function rescore(policy: Policy, reference: Policy | null, input: RescoreInput): Promise<RescoreResult> {
  const started = performance.now()
  const samples: ScoredSample[] = []
  const fits: FittedPrompt[] = []
  const teacherItems: Array<{ index: number; item: ScoreItem }> = []
  const controlItems: ScoreItem[] = []
  const controlled = input.controlBlocks !== undefined
  let uncontrolledSamples = 0
  for (const t of input.trajectories) {
    const controlBlock = input.controlBlocks?.[t.id] ?? null
    t.steps.forEach((s, step) => {
      const block = blockAt(input.teacherBlocks?.[t.id], step)
      let teacherPromptIds: number[] | null = null
      if (block) {
        const fit = fitPrompt(policy.codec, s.promptText, input.budget, block)
        fits.push(fit)
        if (!fit.blockDropped) {
          const control = controlBlock ? fitPrompt(policy.codec, s.promptText, input.budget, controlBlock) : null
          if (controlled && (!control || control.blockDropped)) uncontrolledSamples++
          else {
            teacherPromptIds = fit.ids
            teacherItems.push({ index: samples.length, item: { context: teacherPromptIds, response: s.responseIds } })
            if (control) controlItems.push({ context: control.ids, response: s.responseIds })
          }
        }
      }
      samples.push({
        trajectory: t.id,
        group: t.group,
        step,
        promptIds: s.promptIds,
        responseIds: s.responseIds,
        valid: s.valid,
        ...(s.expertAction === undefined ? {} : { expert: s.valid && s.action === s.expertAction }),
        episodeReward: t.totalReward,
        trajectoryLength: t.steps.length,
        old: new Float64Array(0),
        ref: new Float64Array(0),
        teacher: null,
        ...(controlled ? { control: null } : {}),
        teacherPromptIds,
      })
    })
  }
  const ordinary = samples.map((s) => ({ context: s.promptIds, response: s.responseIds }))
  const items = ordinary.length * (reference ? 2 : 1) + teacherItems.length + controlItems.length
  let scored = 0
  const options = {
    batchSize: input.batchSize,
    temperature: input.temperature,
    onBatch: (n: number) => {
      scored += n
      input.onProgress?.(scored, items)
    },
  }
  const old = await scoreAll(policy.model, ordinary, options)
  const ref = reference ? await scoreAll(reference.model, ordinary, options) : old.map((x) => x.slice())
  const teacher = await scoreAll(
    policy.model,
    teacherItems.map((t) => t.item),
    options,
  )
  const control = await scoreAll(policy.model, controlItems, options)
  let maxSamplerGap = 0
  samples.forEach((s, i) => {
    s.old = old[i]!
    s.ref = ref[i]!
  })
  let index = 0
  for (const t of input.trajectories) {
    for (const st of t.steps) {
      const s = samples[index++]!
      for (let k = 0; k < st.samplerLogprobs.length; k++)
        maxSamplerGap = Math.max(maxSamplerGap, Math.abs(st.samplerLogprobs[k]! - s.old[k]!))
    }
  }
  teacherItems.forEach((t, i) => {
    const s = samples[t.index]!
    s.teacher = teacher[i]!
    if (controlled) s.control = control[i]!
  })
  return {
    samples,
    stats: {
      samples: samples.length,
      teacherSamples: teacherItems.length,
      teacherTruncation: tallyFits(fits),
      maxSamplerGap,
      teacherGap: sideMeans(samples, (s) => s.old),
      controlGap: controlled ? sideMeans(samples, (s) => s.control ?? null) : null,
      uncontrolledSamples,
      seconds: (performance.now() - started) / 1000,
    },
  }
}

/** The mean of log π_teacher − `base` over whole responses, for expert and for other actions. */
function sideMeans(samples: readonly ScoredSample[], base: (s: ScoredSample) => Float64Array | null): SideMeans {
  const sums = { expert: [0, 0], other: [0, 0] }
  for (const s of samples) {
    const b = base(s)
    if (!s.teacher || !b || s.expert === undefined) continue
    let gap = 0
    for (let k = 0; k < s.teacher.length; k++) gap += s.teacher[k]! - b[k]!
    const side = sums[s.expert ? 'expert' : 'other']
    side[0]! += gap
    side[1]! += 1
  }
  const mean = ([total, n]: number[]) => (n! > 0 ? total! / n! : null)
  return {
    expert: mean(sums.expert),
    expertSamples: sums.expert[1]!,
    other: mean(sums.other),
    otherSamples: sums.other[1]!,
  }
}

/** Per-token log-probs of every item, in batches of `batchSize`; `onBatch` gets each batch's size once scored. */
export async function scoreAll(
  model: PolicyModel,
  items: readonly ScoreItem[],
  options: { batchSize: number; temperature: number; onBatch: (items: number) => void },
): Promise<Float64Array[]> {
  const out: Float64Array[] = []
  for (let from = 0; from < items.length; from += options.batchSize) {
    const scored = await model.score(items.slice(from, from + options.batchSize), options.temperature)
    for (const s of scored) out.push(s.logprobs)
    options.onBatch(scored.length)
  }
  return out
}
