// What the skill inspection page shows of one iteration, read from the files its manifest lists: the rollouts
// (trajectories), the analyzer's records (raw answer, parse status, skill) and the rescore samples (teacher and
// student log-probs per response token), joined by trajectory and step, with the tokens as text through the
// run's own tokenizer. The gate is σ(β·(teacher − student)) with the student at π_old (the update recomputes it
// with the live weights, which start equal), β the iteration's opdBeta.

import type { SkillRecord } from '../compute/analyze.ts'
import type { ScoredSample } from '../compute/rescore.ts'
import type { RolloutTrajectory } from '../compute/rollout.ts'
import { TextTokenizer } from '../policy/tokenizer.ts'
import type { RunPlan, Snapshot } from '../records/contracts.ts'
import { runConfigOf } from '../records/hyperparameters.ts'
import type { IterationMetricsRecord } from '../records/iteration-metrics.ts'
import { decodeJsonlGz } from '../records/jsonl.ts'
import { decodeRescore } from '../records/rescore-format.ts'
import { parseSkillLines } from '../records/skill-library.ts'
import { runConfig } from '../seed/config.ts'
import { ChoiceText } from '../serve/choice-text.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { getJson } from '../store/json.ts'
import { type CheckpointFile, keys } from '../store/keys.ts'
import type { Manifest } from '../store/manifest.ts'
import { type DamagedArtifact, DamageLog } from './damage.ts'
import { listRun, type RunListing } from './run-listing.ts'

export class NotInspectableError extends Error {
  override name = 'NotInspectableError'
}

export interface TokenView {
  id: number
  /** The text this token completed ('' inside a multi-byte character, which shows on its last token). */
  text: string
  /** teacher − student log-prob; null without a teacher signal for the sample. */
  shift: number | null
  gate: number | null
}

export interface StepView {
  step: number
  action: string | null
  valid: boolean
  expertAction: string
  reward: number
  actingPrompt: string
  tokens: TokenView[]
  /** The teacher prompt (skill-augmented) as the model saw it, decoded; null without a teacher signal. */
  teacherPrompt: string | null
}

export interface TrajectoryView {
  id: number
  group: number
  task: string
  won: boolean
  totalReward: number
  skill: SkillRecord | null
  steps: StepView[]
  /** The largest |shift| over its tokens (0 without a teacher signal): the page sorts by it. */
  maxShift: number
}

export interface IterationSkills {
  runId: string
  iteration: number
  /** The iteration's opdBeta; null when its configuration could not be read (no gates then). */
  beta: number | null
  trajectories: TrajectoryView[]
  /** Trajectories in the iteration (the page shows `trajectories`, a sample of them when there are more). */
  total: number
  /** Set when no tokenizer was found: tokens show as ids. */
  tokenizerNote?: string
  /** Artifacts of the iteration that could not be read: their trajectories, skills or token colours are missing. */
  damaged: DamagedArtifact[]
}

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x))

/**
 * The first stored tokenizer among the checkpoints that share it: the acting one, the run's Stage 1 and base, a
 * fork's parent's base. A damaged one is noted and the next one tried.
 */
async function tokenizerFor(
  store: ArtifactStore,
  runId: string,
  snapshot: Snapshot | null,
  plan: RunPlan | null,
  damage: DamageLog,
) {
  const folders: Array<(file: CheckpointFile) => string> = [
    ...(snapshot ? [(file: CheckpointFile) => `${snapshot.acting.prefix}${file}`] : []),
    (file) => keys.sftCheckpoint(runId, file),
    (file) => keys.baseCheckpoint(runId, file),
    ...(plan?.fork ? [(file: CheckpointFile) => keys.baseCheckpoint(plan.fork?.runId as string, file)] : []),
  ]
  for (const key of folders) {
    if (!(await store.head(key('tokenizer.json')))) continue
    const json = await damage.read(key('tokenizer.json'), () => getJson(store, key('tokenizer.json')))
    const config = (await store.head(key('tokenizer_config.json')))
      ? await damage.read(key('tokenizer_config.json'), () => getJson(store, key('tokenizer_config.json')))
      : {}
    if (json === undefined || config === undefined) continue
    return new TextTokenizer(json as object, config as object)
  }
  return null
}

/** The pieces of text each token adds, decoded incrementally (serve's ChoiceText, no stop strings). */
function pieces(tokenizer: TextTokenizer | null, ids: readonly number[]): string[] {
  if (!tokenizer) return ids.map((id) => `⟨${id}⟩`)
  const text = new ChoiceText((x) => tokenizer.decode(x))
  const out = ids.map((id) => text.push(id))
  const rest = text.flush()
  if (rest && out.length > 0) out[out.length - 1] += rest
  return out
}

/** Evenly spaced trajectories, at most `limit` of them, in id order. */
function sample<T>(items: readonly T[], limit: number): T[] {
  if (items.length <= limit) return [...items]
  return Array.from({ length: limit }, (_, i) => items[Math.floor((i * items.length) / limit)] as T)
}

/** The iteration's files in one output folder (`rollouts/0000.jsonl.gz`, …; not the phase manifests), by its manifest. */
async function iterationFiles(store: ArtifactStore, runId: string, iteration: number, listing: RunListing) {
  const manifestKey = listing.latest((a) => keys.iterationManifest(runId, iteration, a))
  if (!manifestKey) throw new NotInspectableError(`run ${runId} has no complete iteration ${iteration}`)
  const read = new DamageLog()
  const manifest = await read.read(manifestKey, async () => (await getJson(store, manifestKey)) as Manifest)
  if (!manifest) {
    const [damaged] = read.items
    throw new NotInspectableError(
      `iteration ${iteration} of ${runId}: its manifest cannot be read (${damaged?.reason})`,
    )
  }
  const listed = Object.keys(manifest.artifacts).sort()
  const files = (folder: string, ext: string) => listed.filter((k) => k.split('/').at(-2) === folder && k.endsWith(ext))
  return { listed, files }
}

/** The analyzer's records of one complete iteration (every shard's), in trajectory order. */
export async function readSkillRecords(
  store: ArtifactStore,
  runId: string,
  iteration: number,
  listing?: RunListing,
): Promise<SkillRecord[]> {
  const { files } = await iterationFiles(store, runId, iteration, listing ?? (await listRun(store, runId)))
  return skillRecordsIn(store, files('skills', '.jsonl'))
}

async function skillRecordsIn(
  store: ArtifactStore,
  skillFiles: readonly string[],
  damage?: DamageLog,
): Promise<SkillRecord[]> {
  const out: SkillRecord[] = []
  for (const key of skillFiles) {
    const read = async () => parseSkillLines((await store.get(key)).toString('utf8'), key)
    out.push(...((damage ? await damage.read(key, read) : await read()) ?? []))
  }
  return out.sort((a, b) => a.trajectory - b.trajectory)
}

export async function readIterationSkills(
  store: ArtifactStore,
  runId: string,
  iteration: number,
  options: { limit: number /** The run's keys, when the caller listed them already. */; listing?: RunListing },
): Promise<IterationSkills> {
  const listing = options.listing ?? (await listRun(store, runId))
  const { listed, files } = await iterationFiles(store, runId, iteration, listing)
  const missing = [...files('rollouts', '.jsonl.gz'), ...files('rescore', '.bin')].find((k) => !listing.has(k))
  if (missing) throw new NotInspectableError(`iteration ${iteration} of ${runId}: ${missing} was pruned by retention`)

  // a damaged file costs what it holds (a shard's trajectories, skills or token colours), not the page
  const damage = new DamageLog()
  const trajectories: RolloutTrajectory[] = []
  for (const key of files('rollouts', '.jsonl.gz')) {
    const read = async () => decodeJsonlGz(await store.get(key), key) as RolloutTrajectory[]
    trajectories.push(...((await damage.read(key, read)) ?? []))
  }
  const skills = new Map<number, SkillRecord>()
  for (const s of await skillRecordsIn(store, files('skills', '.jsonl'), damage)) skills.set(s.trajectory, s)
  const scored = new Map<string, ScoredSample>()
  for (const key of files('rescore', '.bin')) {
    const samples = await damage.read(key, async () => decodeRescore(await store.get(key), key))
    for (const s of samples ?? []) scored.set(`${s.trajectory}/${s.step}`, s)
  }

  // β of the configuration the iteration ran under (the effective one after hyperparameter changes)
  const metricsKey = listing.latest((a) => keys.metrics(runId, iteration, a))
  if (!metricsKey) throw new NotInspectableError(`iteration ${iteration} of ${runId} has no metrics.json`)
  const json = <T>(key: string) => damage.read(key, async () => (await getJson(store, key)) as T)
  const metrics = await json<IterationMetricsRecord>(metricsKey)
  const config = metrics
    ? await damage.read(keys.runRecord(runId), () => runConfigOf(store, { runId, configSha256: metrics.configSha256 }))
    : undefined
  const beta = config ? runConfig(config.config).stage2.opdBeta : null
  const snapshotKey = listed.find((k) => /\/snapshot(\.attempt-\d+)?\.json$/.test(k))
  const snapshot = snapshotKey ? ((await json<Snapshot>(snapshotKey)) ?? null) : null
  const plan = listing.has(keys.runPlan(runId)) ? ((await json<RunPlan>(keys.runPlan(runId))) ?? null) : null
  const tokenizer = await tokenizerFor(store, runId, snapshot, plan, damage)

  trajectories.sort((a, b) => a.id - b.id)
  const views = sample(trajectories, options.limit).map((t): TrajectoryView => {
    let maxShift = 0
    const steps = t.steps.map((step, i): StepView => {
      const s = scored.get(`${t.id}/${i}`)
      const ids = s?.responseIds ?? step.responseIds
      const text = pieces(tokenizer, ids)
      const tokens = ids.map((id, j): TokenView => {
        const shift = s?.teacher ? (s.teacher[j] as number) - (s.old[j] as number) : null
        if (shift !== null) maxShift = Math.max(maxShift, Math.abs(shift))
        const gate = shift === null || beta === null ? null : sigmoid(beta * shift)
        return { id, text: text[j] ?? '', shift, gate }
      })
      return {
        step: i,
        action: step.action,
        valid: step.valid,
        expertAction: step.expertAction,
        reward: step.reward,
        actingPrompt: step.actingPrompt,
        tokens,
        teacherPrompt: s?.teacherPromptIds && tokenizer ? tokenizer.decode(s.teacherPromptIds) : null,
      }
    })
    return {
      id: t.id,
      group: t.group,
      task: JSON.stringify(t.task),
      won: t.won,
      totalReward: t.totalReward,
      skill: skills.get(t.id) ?? null,
      steps,
      maxShift,
    }
  })
  return {
    runId,
    iteration,
    beta,
    trajectories: views,
    total: trajectories.length,
    ...(tokenizer ? {} : { tokenizerNote: 'no readable tokenizer.json is stored for this run: tokens show as ids' }),
    damaged: damage.items,
  }
}
