// A run's rollouts and analyzer answers as the per-step dumps of the reference SEED implementation
// (lljcic2024-boop/agent_rl at aadf09e, verl/trainer/ppo/ray_trainer.py), so the two can be compared line by line.
// Its SEED scripts set `trainer.rollout_data_dir` to `trainer.default_local_dir`, and `algorithm.seed.save_analysis`
// is on by default, so one training step writes, under one folder:
//
//   {step}.jsonl                          `_dump_generations`: one line per step sample, by sample, rollout, step
//   seed_analysis/step_{step:08d}.jsonl   `_dump_seed_analysis`: one line per analyzed trajectory
//
// verl's global_steps is 1 in the first training step, so seedflow's iteration k is step k + 1. Only complete
// iterations (with an iteration manifest) are written, from the outputs of the phase manifests that the
// iteration's metrics.json names.
//
// Keys without a seedflow counterpart, written as null: analysis_backend_requested, analysis_backend_used (the
// reference names its vLLM or OpenAI backend). Differences in meaning: `input` is the acting prompt before the chat
// template (the reference decodes the templated ids) and whole under `left` truncation; `uid` is the task group
// and `traj_uid` the trajectory id, as numbers in strings (the reference writes uuid4s).
import { mkdir, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import type { RolloutTrajectory, SkillRecord } from '../compute/index.ts'
import { UnknownRunError } from '../records/audit.ts'
import type { RunPlan } from '../records/contracts.ts'
import { runConfigOf } from '../records/hyperparameters.ts'
import type { IterationMetricsRecord } from '../records/iteration-metrics.ts'
import { decodeJsonlGz } from '../records/jsonl.ts'
import type { PhaseManifest } from '../records/phase-manifest.ts'
import { parseSkillLines } from '../records/skill-library.ts'
import { stepScore } from '../seed/advantages.ts'
import { episodeOutcome } from '../seed/analyzer.ts'
import { runConfig } from '../seed/config.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { latestAttempt } from '../store/attempts.ts'
import { getExpected, getJson } from '../store/json.ts'
import { assertValidRunId, keys } from '../store/keys.ts'
import type { Manifest } from '../store/manifest.ts'
import { type PrunedArtifact, readPruned } from '../store/pruned.ts'

/**
 * The analyzer settings seedflow always runs with, in the reference's names: those of its released runs
 * (docs/algorithm.md §4); every trajectory is analyzed (`failed_only=False`, hence `teacher_bootstrap`).
 */
const ANALYZER_SETTINGS = {
  selector: 'llm',
  analysis_mode: 'teacher_bootstrap',
  skill_mode: 'episode_only',
  analysis_prompt_version: 'seed',
} as const

const SEED_ANALYSIS_DIR = 'seed_analysis'
const rolloutDumpName = (step: number) => `${step}.jsonl`
const analysisDumpName = (step: number) => `${SEED_ANALYSIS_DIR}/step_${String(step).padStart(8, '0')}.jsonl`

/** What one finished iteration left, read through its phase manifests. */
interface IterationDumpInput {
  step: number
  trajectories: RolloutTrajectory[]
  skills: SkillRecord[]
  invalidPenalty: number
}

/** `_dump_generations`' lines: its base keys, then the rollout loop's per-sample fields, in its order. */
function rolloutLines({ step, trajectories, invalidPenalty }: IterationDumpInput) {
  const sorted = [...trajectories].sort((a, b) => a.group - b.group || a.sample - b.sample)
  return sorted.flatMap((t) =>
    t.steps.map((s, n) => ({
      input: s.actingPrompt,
      output: s.responseText,
      // token_level_scores summed: the episode reward, less the penalty on an invalid action
      score: stepScore(t.totalReward, s.valid, invalidPenalty),
      step,
      sample_id: t.group,
      rollout_id: t.sample,
      step_num: n,
      step_id: `${t.group}_${t.sample}_${n}`,
      uid: String(t.group),
      traj_uid: String(t.id),
      obs_text: s.actingPrompt,
      obs_text_base: s.promptText,
      is_action_valid: s.valid,
    })),
  )
}

/** `_dump_seed_analysis`' lines, one per skill record. */
function analysisLines({ step, trajectories, skills }: IterationDumpInput, runId: string) {
  const byId = new Map(trajectories.map((t) => [t.id, t]))
  return skills.map((r) => {
    const t = byId.get(r.trajectory)
    if (!t) throw new Error(`run ${runId}, step ${step}: skill record of trajectory ${r.trajectory} has no rollout`)
    const indices = t.steps.map((_, n) => n)
    return {
      global_step: step,
      traj_uid: String(r.trajectory),
      selector: ANALYZER_SETTINGS.selector,
      analysis_mode: ANALYZER_SETTINGS.analysis_mode,
      skill_mode: ANALYZER_SETTINGS.skill_mode,
      analysis_prompt_version: ANALYZER_SETTINGS.analysis_prompt_version,
      analysis_backend_requested: null,
      analysis_backend_used: null,
      include_episode_summary: true,
      analysis_error: r.failure ? `${r.failure.code}: ${r.failure.reason}` : null,
      episode_success: episodeOutcome(t.totalReward) === 'success' ? 1 : 0,
      candidate_step_indices: indices,
      num_steps: indices.length,
      step_indices: indices,
      episode_summary: r.summary ?? '',
      episode_skill: r.skill ?? '',
      step_skills: {},
      llm_prompt: { messages: [{ role: 'user', content: r.prompt }] },
      llm_raw_output: r.raw,
    }
  })
}

const jsonl = (lines: readonly unknown[]) => lines.map((l) => `${JSON.stringify(l)}\n`).join('')

/** Reads output `name` of a phase manifest; `{ missing }` says why it is gone when it is. */
async function readOutput(
  store: ArtifactStore,
  manifest: PhaseManifest,
  name: string,
  pruned: ReadonlyMap<string, PrunedArtifact>,
): Promise<Buffer | { missing: string }> {
  const info = manifest.outputs[name]
  if (!info) throw new Error(`the ${manifest.scope.phase} manifest of shard ${manifest.scope.shard} records no ${name}`)
  if (await store.head(info.key)) return getExpected(store, info.key, info.sha256)
  const p = pruned.get(info.key)
  return {
    missing: p
      ? `${info.key} was pruned by retention (${p.pruned.reason})`
      : `${info.key} is missing and no retention record lists it (\`seedflow audit\` tells more)`,
  }
}

/** The iteration's dump input, or why it cannot be written. */
async function readIteration(
  store: ArtifactStore,
  runId: string,
  k: number,
  attempt: number,
  pruned: ReadonlyMap<string, PrunedArtifact>,
  penalties: Map<string, number>,
): Promise<IterationDumpInput | { missing: string }> {
  const manifest = (await getJson(store, keys.iterationManifest(runId, k, attempt))) as Manifest
  const recorded = (key: string) => getJson(store, key, manifest.artifacts[key]?.sha256)
  const metrics = (await recorded(keys.metrics(runId, k, attempt))) as IterationMetricsRecord
  const phase = async (name: 'rollout' | 'analyze' | 'update') =>
    Promise.all((metrics.phases[name] ?? []).map(async (s) => (await recorded(s.manifest)) as PhaseManifest))
  const trajectories: RolloutTrajectory[] = []
  for (const m of await phase('rollout')) {
    const bytes = await readOutput(store, m, 'rollouts', pruned)
    if (!Buffer.isBuffer(bytes)) return bytes
    trajectories.push(...(decodeJsonlGz(bytes, m.outputs.rollouts?.key ?? 'rollouts') as RolloutTrajectory[]))
  }
  const skills: SkillRecord[] = []
  for (const m of await phase('analyze')) {
    const bytes = await readOutput(store, m, 'skills', pruned)
    if (!Buffer.isBuffer(bytes)) return bytes
    skills.push(...parseSkillLines(bytes.toString('utf8'), m.outputs.skills?.key ?? 'skills'))
  }
  // the penalty of the configuration the update ran under (a hyperparameter change may have set it)
  const configSha256 = (await phase('update'))[0]?.configSha256 ?? metrics.configSha256
  let invalidPenalty = penalties.get(configSha256)
  if (invalidPenalty === undefined) {
    invalidPenalty = runConfig((await runConfigOf(store, { runId, configSha256 })).config).stage2.invalidPenalty
    penalties.set(configSha256, invalidPenalty)
  }
  return { step: k + 1, trajectories, skills, invalidPenalty }
}

export async function exportVerlDumps(
  store: ArtifactStore,
  runId: string,
  outDir: string,
  opts: { onProgress?: (msg: string) => void } = {},
): Promise<{ files: string[]; iterations: number }> {
  assertValidRunId(runId)
  const runKey = keys.runRecord(runId)
  if (!(await store.head(runKey))) throw new UnknownRunError(`unknown run ${runId}: no ${runKey} in ${store.location}`)
  const note = opts.onProgress ?? (() => {})
  const plan = (await store.head(keys.runPlan(runId)))
    ? ((await getJson(store, keys.runPlan(runId))) as RunPlan)
    : undefined
  const pruned = await readPruned(store, runId)
  const penalties = new Map<string, number>()
  const files: string[] = []
  let iterations = 0
  for (let k = 0; k < (plan?.iterations ?? 0); k++) {
    const attempt = await latestAttempt(store, (a) => keys.iterationManifest(runId, k, a))
    if (attempt === undefined) {
      // not begun (or before a fork's start): nothing to say; begun: say why it is left out
      const begun = (await store.list(keys.iterationPrefix(runId, k), { pageSize: 1 })).objects.length > 0
      if (begun) note(`iteration ${k} (step ${k + 1}) is not complete (no manifest.json): skipped`)
      continue
    }
    const input = await readIteration(store, runId, k, attempt, pruned, penalties)
    if ('missing' in input) {
      note(`iteration ${k} (step ${k + 1}): ${input.missing}: skipped`)
      continue
    }
    // as the reference, no analysis file for a step without analyzed trajectories (rows without `analyze`)
    const written: Array<[string, unknown[]]> = [[rolloutDumpName(input.step), rolloutLines(input)]]
    if (input.skills.length > 0) written.push([analysisDumpName(input.step), analysisLines(input, runId)])
    for (const [name, lines] of written) {
      await mkdir(dirname(join(outDir, name)), { recursive: true })
      await writeFile(join(outDir, name), jsonl(lines))
      files.push(join(outDir, name))
    }
    iterations++
    note(
      `iteration ${k} → step ${input.step}: ${written.map(([name, lines]) => `${name} (${lines.length} lines)`).join(', ')}`,
    )
  }
  return { files, iterations }
}
