// Hyperparameter changes of a running run, in the store: each accepted change as a run-level record
// (`runs/<id>/hyperparameters/<seq>.json`) and the effective configuration it makes, under its hash
// (`runs/<id>/configs/<sha256>.json`). A RunRef whose configSha256 is not the run record's names one of these:
// the activities read and hash the effective configuration, so a phase computed before a change is not reused
// after it (the phase wrapper recomputes it under a new attempt).
import { parseRunConfig } from '../seed/config.ts'
import { effectiveConfig, type HyperparameterOverrides } from '../seed/hyperparameters.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { NotFoundError } from '../store/errors.ts'
import { sha256Hex } from '../store/hash.ts'
import { canonicalJson, getJson, putJsonIfAbsent, readJsonUnder, type UnreadableObject } from '../store/json.ts'
import { keys } from '../store/keys.ts'
import type { ArtifactRef, HyperparameterChange, RunRef } from './contracts.ts'
import { fatal } from './failures.ts'
import type { RunRecord } from './record-run.ts'

/** `runs/<id>/configs/<sha256>.json`: an effective configuration and how it came from the run's. */
export interface EffectiveConfigRecord {
  runId: string
  configSha256: string
  /** The run record's configuration hash (the configuration as given). */
  baseConfigSha256: string
  overrides: HyperparameterOverrides
  config: unknown
}

/**
 * The configuration a RunRef names, as given (unparsed) and with the overrides that made it (none for the run's
 * own). A hash that names neither fails for good: the workflow and the store disagree about the run.
 */
export async function runConfigOf(
  store: ArtifactStore,
  run: RunRef,
): Promise<{ config: unknown; overrides: HyperparameterOverrides | null }> {
  const record = (await getJson(store, keys.runRecord(run.runId))) as RunRecord
  if (record.configSha256 === run.configSha256) return { config: record.config, overrides: null }
  const key = keys.effectiveConfig(run.runId, run.configSha256)
  let effective: EffectiveConfigRecord
  try {
    effective = (await getJson(store, key)) as EffectiveConfigRecord
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error
    throw fatal(
      `run ${run.runId} was recorded with config ${record.configSha256} and has no changed config ${run.configSha256} (${key})`,
      'RunConfigConflict',
    )
  }
  const sha = sha256Hex(Buffer.from(canonicalJson(effective.config)))
  if (sha !== run.configSha256 || effective.baseConfigSha256 !== record.configSha256) {
    throw fatal(
      `${key}: its config hashes to ${sha} on top of ${effective.baseConfigSha256}, not ${run.configSha256} on top of ${record.configSha256}`,
      'IntegrityError',
    )
  }
  return { config: effective.config, overrides: effective.overrides }
}

/**
 * Records an accepted change: the effective configuration under its hash and the change itself, both
 * create-if-absent (a retried activity finds them written). Returns the RunRef of the changed run. The workflow
 * validated the change; a configuration that no longer parses here fails for good.
 */
export async function recordHyperparameters(
  store: ArtifactStore,
  input: { run: RunRef; change: HyperparameterChange },
): Promise<{ run: RunRef; record: ArtifactRef }> {
  const { run, change } = input
  const record = (await getJson(store, keys.runRecord(run.runId))) as RunRecord
  const config = effectiveConfig(record.config, change.cumulative)
  const parsed = parseRunConfig(config)
  if (!parsed.ok) throw fatal(`invalid hyperparameters:\n${parsed.problems.join('\n')}`, 'InvalidRunConfig')
  const configSha256 = sha256Hex(Buffer.from(canonicalJson(config)))
  const effective: EffectiveConfigRecord = {
    runId: run.runId,
    configSha256,
    baseConfigSha256: record.configSha256,
    overrides: change.cumulative,
    config,
  }
  if (configSha256 !== record.configSha256)
    await putJsonIfAbsent(store, keys.effectiveConfig(run.runId, configSha256), effective)
  const written = await putJsonIfAbsent(store, keys.hyperparameterChange(run.runId, change.seq), {
    runId: run.runId,
    ...change,
    previousConfigSha256: run.configSha256,
    configSha256,
  })
  const info = written.info
  return { run: { ...run, configSha256 }, record: { key: info.key, sha256: info.sha256, bytes: info.bytes } }
}

/** A change as the store holds it: the workflow's record with the configuration hashes before and after. */
export interface RecordedHyperparameterChange extends HyperparameterChange {
  runId: string
  previousConfigSha256: string
  configSha256: string
}

/**
 * Every readable recorded change of a run, in the order accepted, and apart the records that could not be read
 * (audit and the report name them and go on).
 */
export async function readHyperparameterChanges(
  store: ArtifactStore,
  runId: string,
): Promise<{ changes: RecordedHyperparameterChange[]; unreadable: UnreadableObject[] }> {
  const { read, unreadable } = await readJsonUnder(store, keys.hyperparametersPrefix(runId))
  const changes = read.map((r) => r.value as RecordedHyperparameterChange).sort((a, b) => a.seq - b.seq)
  return { changes, unreadable }
}
