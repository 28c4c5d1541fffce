// Retention (docs/design.md §5.4): after each iteration, keep the last N iteration checkpoints, the best by
// evaluation and every evaluated one, and optimizer state only for the newest. What is pruned is first written to
// a retention record (a manifest whose entries are marked pruned, with when and why), then deleted: a crash in
// between leaves a recorded deletion that the next pass finishes, never an unrecorded one.

import type { RunRef } from '../records/contracts.ts'
import type { PhaseManifest } from '../records/phase-manifest.ts'
import { SEEDFLOW_VERSION } from '../records/seedflow-version.ts'
import type { RetentionConfig } from '../seed/config.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { latestAttempt } from '../store/attempts.ts'
import { getJson, putJsonIfAbsent } from '../store/json.ts'
import { keys } from '../store/keys.ts'
import type { Manifest, ManifestEntry } from '../store/manifest.ts'
import { readPruned } from '../store/pruned.ts'

/** One iteration's checkpoint as retention sees it: its held-out success, or null when it was not evaluated. */
export interface CheckpointHistory {
  iteration: number
  success: number | null
}

export interface RetentionPlan {
  /** Iterations whose whole checkpoint goes, with the reason. */
  prune: Array<{ iteration: number; reason: string }>
  /** Iterations whose checkpoint stays but whose optimizer state goes. */
  dropOptimizer: Array<{ iteration: number; reason: string }>
}

/** The best evaluated checkpoint: highest success, the earliest on a tie; undefined when none was evaluated. */
function bestOf(history: readonly CheckpointHistory[]): CheckpointHistory | undefined {
  let best: CheckpointHistory | undefined
  for (const h of history) if (h.success !== null && (best === undefined || h.success > (best.success ?? -1))) best = h
  return best
}

/** Which checkpoints of `history` (one per finished iteration) to prune, and whose optimizer state to drop. */
export function planRetention(history: readonly CheckpointHistory[], policy: RetentionConfig): RetentionPlan {
  const sorted = [...history].sort((a, b) => a.iteration - b.iteration)
  const last = sorted.slice(-policy.keepLast).map((h) => h.iteration)
  const newest = sorted.at(-1)?.iteration
  const best = policy.keepBest ? bestOf(sorted) : undefined
  const plan: RetentionPlan = { prune: [], dropOptimizer: [] }
  for (const h of sorted) {
    const kept =
      last.includes(h.iteration) ||
      (best !== undefined && h.iteration === best.iteration) ||
      (policy.keepEvaluated && h.success !== null)
    if (!kept) {
      const why = [
        `not among the last ${policy.keepLast} (${last.length === 1 ? `iteration ${last[0]}` : `iterations ${last[0]}-${last.at(-1)}`})`,
        policy.keepBest
          ? best
            ? `not the best by evaluation (iteration ${best.iteration}: ${best.success})`
            : 'no checkpoint evaluated yet'
          : 'keepBest off',
        h.success === null ? 'not evaluated' : 'keepEvaluated off',
      ]
      plan.prune.push({ iteration: h.iteration, reason: why.join(', ') })
    } else if (policy.optimizerStateOnlyForLast && h.iteration !== newest) {
      plan.dropOptimizer.push({
        iteration: h.iteration,
        reason: `optimizer state is kept only for the newest checkpoint (iteration ${newest})`,
      })
    }
  }
  return plan
}

/** The checkpoint files an iteration manifest lists (the update phase's outputs), by file name. */
function checkpointEntries(manifest: Manifest, runId: string, k: number): Map<string, [string, ManifestEntry]> {
  const folder = new RegExp(
    `^${keys.iterationPrefix(runId, k).replaceAll('.', '\\.')}checkpoint(\\.attempt-\\d+)?/((?:adapter/)?[^/]+)$`, // LoRA: adapter/ (store/keys.ts)
  )
  const out = new Map<string, [string, ManifestEntry]>()
  for (const [key, entry] of Object.entries(manifest.artifacts)) {
    const file = folder.exec(key)?.[2]
    if (file) out.set(file, [key, entry])
  }
  return out
}

/** The latest attempt of a JSON object, or undefined. */
async function latestJson<T>(store: ArtifactStore, keyOf: (attempt: number) => string): Promise<T | undefined> {
  const attempt = await latestAttempt(store, keyOf)
  return attempt === undefined ? undefined : ((await getJson(store, keyOf(attempt))) as T)
}

export interface RetentionSummary {
  /** The retention record written (or found) for this iteration; undefined when nothing was pruned. */
  record?: string
  /** Keys deleted by this call (already missing ones are not counted). */
  deleted: string[]
}

/**
 * Retention after iteration `iteration`: plans over the checkpoints of iterations 0 … `iteration` (their
 * iteration manifests and evaluations), writes the retention record, then deletes. Idempotent: a record that
 * exists already (a retried activity) is finished, not replanned.
 */
export async function applyRetention(
  deps: { store: ArtifactStore; now?: () => Date },
  run: RunRef,
  iteration: number,
  policy: RetentionConfig,
): Promise<RetentionSummary> {
  const { store } = deps
  const recordKey = keys.retentionRecord(run.runId, iteration)
  let record = (await store.head(recordKey)) ? ((await getJson(store, recordKey)) as Manifest) : undefined
  if (!record) {
    const pruned = await readPruned(store, run.runId)
    const history: CheckpointHistory[] = []
    const files = new Map<number, Map<string, [string, ManifestEntry]>>()
    for (let k = 0; k <= iteration; k++) {
      const manifest = await latestJson<Manifest>(store, (a) => keys.iterationManifest(run.runId, k, a))
      if (!manifest) continue
      const evaluation = await latestJson<PhaseManifest>(store, (a) =>
        keys.phaseManifest(run.runId, k, 'evaluate', 0, a),
      )
      files.set(k, checkpointEntries(manifest, run.runId, k))
      history.push({ iteration: k, success: evaluation?.stats.success ?? null })
    }
    const plan = planRetention(history, policy)
    const at = (deps.now ?? (() => new Date()))().toISOString()
    const artifacts: Record<string, ManifestEntry> = {}
    const mark = (k: number, which: (file: string) => boolean, reason: string) => {
      for (const [file, [key, entry]] of files.get(k) ?? []) {
        if (!which(file) || pruned.has(key)) continue
        artifacts[key] = { ...entry, pruned: { at, reason: `retention after iteration ${iteration}: ${reason}` } }
      }
    }
    for (const p of plan.prune) mark(p.iteration, () => true, p.reason)
    for (const p of plan.dropOptimizer) mark(p.iteration, (file) => file === 'optimizer.safetensors', p.reason)
    if (Object.keys(artifacts).length === 0) return { deleted: [] }
    const mine: Manifest = {
      version: 1,
      runId: run.runId,
      configSha256: run.configSha256,
      seedflowVersion: SEEDFLOW_VERSION,
      createdAt: at,
      artifacts,
    }
    const written = await putJsonIfAbsent(store, recordKey, mine)
    // a racing attempt wrote it first: finish that one's deletions
    record = written.created ? mine : ((await getJson(store, recordKey)) as Manifest)
  }
  const deleted: string[] = []
  for (const [key, entry] of Object.entries(record.artifacts).sort(([a], [b]) => (a < b ? -1 : 1))) {
    // a blob that is no longer the recorded one is left for audit to report, not deleted
    if ((await store.head(key))?.sha256 !== entry.sha256) continue
    await store.delete(key)
    deleted.push(key)
  }
  return { record: recordKey, deleted }
}
