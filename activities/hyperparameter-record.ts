// The run-level record of hyperparameter changes (the `setHyperparameters` update): one object per accepted
// change, runs/{run}/hyperparameters/{seq}.json, numbered in the order accepted and never rewritten. Phases that
// ran after a change carry the changed config's hash in their manifests; `seedflow audit` lists the changes and
// names any config hash that neither run.json nor a change explains.
import { type ArtifactStore, listAll } from '../store/artifact-store.ts'
import { canonicalJson, getJson, putJsonIfAbsent } from '../store/json.ts'
import { keys } from '../store/keys.ts'
import { SEEDFLOW_VERSION } from './seedflow-version.ts'

export interface HyperparameterChange {
  version: 1
  runId: string
  /** 0, 1, … in the order the changes were accepted. */
  seq: number
  acceptedAt: string
  /** The first iteration that runs with the change. */
  fromIteration: number
  /** Config path (dotted, e.g. `stage2.lr`) → the accepted value. */
  changes: Record<string, unknown>
  /** sha256 of the effective config after the change: what later phase manifests record as configSha256. */
  configSha256: string
  seedflowVersion: string
}

export type HyperparameterChangeInput = Pick<
  HyperparameterChange,
  'runId' | 'acceptedAt' | 'fromIteration' | 'changes' | 'configSha256'
>

/** Every recorded change of a run, in order. */
export async function readHyperparameterChanges(store: ArtifactStore, runId: string): Promise<HyperparameterChange[]> {
  const out: HyperparameterChange[] = []
  for await (const { key } of listAll(store, keys.hyperparametersPrefix(runId))) {
    out.push((await getJson(store, key)) as HyperparameterChange)
  }
  return out.sort((a, b) => a.seq - b.seq)
}

const sameChange = (a: HyperparameterChangeInput, b: HyperparameterChangeInput) =>
  canonicalJson([a.fromIteration, a.changes, a.configSha256]) ===
  canonicalJson([b.fromIteration, b.changes, b.configSha256])

/**
 * Records an accepted change under the next free number (create-if-absent, so concurrent writers get distinct
 * numbers). A retried call whose change is already the last one recorded returns that one instead of a duplicate.
 */
export async function recordHyperparameterChange(
  store: ArtifactStore,
  change: HyperparameterChangeInput,
): Promise<{ key: string; seq: number }> {
  const existing = await readHyperparameterChanges(store, change.runId)
  const last = existing.at(-1)
  if (last && sameChange(last, change)) return { key: keys.hyperparameterChange(change.runId, last.seq), seq: last.seq }
  for (let seq = existing.length; ; seq++) {
    const key = keys.hyperparameterChange(change.runId, seq)
    const record: HyperparameterChange = { version: 1, seq, ...change, seedflowVersion: SEEDFLOW_VERSION }
    if ((await putJsonIfAbsent(store, key, record)).created) return { key, seq }
  }
}
