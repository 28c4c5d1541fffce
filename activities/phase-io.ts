// What phase bodies read and write besides their own outputs: checkpoints (loaded, verified against the
// reference, released when the activity ends), snapshots, trajectories, skills, the Stage 1 library, the run
// plan; and the checkpoint folder helpers that turn a written folder into a phase's outputs.
import { AsyncLocalStorage } from 'node:async_hooks'
import { loadPolicy, type Policy, type RolloutTrajectory, type SkillRecord } from '../compute/index.ts'
import type { AdamWState, Engine } from '../engine/index.ts'
import type { Checkpoint } from '../policy/checkpoint.ts'
import { loadCheckpoint, type OptimizerState, putCheckpoint } from '../records/checkpoint-store.ts'
import type { ArtifactRef, CheckpointRef, RunPlan, RunRef, Snapshot } from '../records/contracts.ts'
import { fatal } from '../records/failures.ts'
import { decodeJsonlGz } from '../records/jsonl.ts'
import { parseSkillLines, readAnnotations, readSkillLibrary } from '../records/skill-library.ts'
import { ENGINE_DEFAULTS, type EngineSettingsConfig } from '../seed/config.ts'
import type { ArtifactStore, ObjectInfo } from '../store/artifact-store.ts'
import { getExpected, getJson } from '../store/json.ts'
import { type CheckpointFile, keys } from '../store/keys.ts'
import { ResidentPolicies } from './resident-policies.ts'

export const MODEL_FILE: CheckpointFile = 'model.safetensors'

/** The policies an activity loaded, released when it ends: a worker lives for many activities. */
const activityPolicies = new AsyncLocalStorage<Policy[]>()

/** Runs `body` with a scope that releases every policy loaded in it (policyOf) when it ends. */
export async function withPolicyScope<T>(body: () => Promise<T>): Promise<T> {
  const loaded: Policy[] = []
  try {
    return await activityPolicies.run(loaded, body)
  } finally {
    await Promise.all(loaded.map((p) => p.trainer.release()))
  }
}

export function artifactRef(info: ObjectInfo): ArtifactRef {
  return { key: info.key, sha256: info.sha256, bytes: info.bytes }
}

/** The key prefix of a checkpoint folder, from the key of its model file. */
export function folderOf(modelKey: string): string {
  return modelKey.slice(0, -MODEL_FILE.length)
}

/** Writes a checkpoint folder beside `modelKey` (the key its model file gets); its files are the phase's outputs. */
export async function writeCheckpoint(
  store: ArtifactStore,
  modelKey: string,
  checkpoint: Checkpoint,
  optimizer?: OptimizerState,
): Promise<Record<string, ObjectInfo>> {
  return (await putCheckpoint(store, folderOf(modelKey), checkpoint, optimizer)) as Record<string, ObjectInfo>
}

/** The checkpoint a phase's outputs hold; its absence breaks the phase's contract. */
export function checkpointOf(outputs: Record<string, ObjectInfo>, what: string): CheckpointRef {
  const model = outputs[MODEL_FILE]
  if (!model) throw fatal(`${what}: the manifest records no ${MODEL_FILE}`, 'PhaseContractError')
  return { prefix: folderOf(model.key), sha256: model.sha256 }
}

/** Only finite numbers survive into stats; a non-finite loss fails the phase for good. */
export function numericStats(values: object, lossNames: readonly string[] = []): Record<string, number> {
  const stats: Record<string, number> = {}
  for (const [name, value] of Object.entries(values)) {
    if (typeof value !== 'number') continue
    if (!Number.isFinite(value)) {
      if (lossNames.includes(name)) throw fatal(`${name} is ${value}`, 'NonFiniteLossError')
      continue
    }
    stats[name] = value
  }
  return stats
}

/** A worker's resident policies and the identity of its store, which keys them. */
export interface Residency {
  policies: ResidentPolicies
  storeId(): Promise<string>
}

/**
 * The readers over one store and engine that phase bodies share; policies load with a run's engine settings.
 * With `residency`, a policy kept by an earlier activity of this worker (`keep`) is taken instead of loaded.
 */
export function phaseReaders(
  store: ArtifactStore,
  engine: Engine,
  settings: EngineSettingsConfig = ENGINE_DEFAULTS,
  residency?: Residency,
) {
  const keyOf = async (ref: CheckpointRef) =>
    residency ? ResidentPolicies.key(await residency.storeId(), ref.sha256, settings) : undefined
  return {
    /**
     * The policy of checkpoint `ref` and, when the checkpoint stores one that the policy's trainer does not hold
     * yet, its optimizer state (load it into the trainer, or not, as the phase needs). `resident`: take it from
     * the worker's resident policies when one holds it (the model-bound phases that `keep` it again).
     */
    async policy(
      ref: CheckpointRef,
      options: { resident?: boolean } = {},
    ): Promise<{ policy: Policy; optimizer?: AdamWState }> {
      const key = options.resident ? await keyOf(ref) : undefined
      const hit = key ? residency?.policies.take(key) : undefined
      if (hit) {
        activityPolicies.getStore()?.push(hit.policy)
        return hit
      }
      const { checkpoint, optimizer } = await loadCheckpoint(store, ref)
      const sha = (await store.head(`${ref.prefix}${MODEL_FILE}`))?.sha256
      if (sha !== ref.sha256) {
        throw fatal(`checkpoint ${ref.prefix}: model sha256 ${sha} is not the expected ${ref.sha256}`, 'IntegrityError')
      }
      const policy = loadPolicy(engine, checkpoint, { settings })
      activityPolicies.getStore()?.push(policy)
      return { policy, ...(optimizer ? { optimizer } : {}) }
    },
    /**
     * Keeps `policy`, which holds exactly checkpoint `ref`, loaded in this worker for a later activity instead
     * of releasing it when this one ends; `optimizer`: the stored optimizer state its trainer does not hold yet
     * (undefined: the trainer holds the stored state, or none is stored and its moments are fresh).
     */
    async keep(ref: CheckpointRef, policy: Policy, optimizer?: AdamWState): Promise<void> {
      const key = await keyOf(ref)
      if (!key || !residency) return
      const scope = activityPolicies.getStore()
      const at = scope?.indexOf(policy) ?? -1
      if (at >= 0) scope?.splice(at, 1)
      // its sessions go (their memory arenas keep a phase's peak, GBs on SmolLM2): the next phase loads them again
      await policy.model.release()
      await residency.policies.keep(key, { policy, ...(optimizer ? { optimizer } : {}) })
    },
    async snapshot(ref: ArtifactRef): Promise<Snapshot> {
      const snapshot = (await getJson(store, ref.key, ref.sha256)) as Snapshot
      if (snapshot?.version !== 1 || !snapshot.acting) throw fatal(`${ref.key} is not a snapshot`, 'CorruptArtifact')
      return snapshot
    },
    async trajectories(ref: ArtifactRef): Promise<RolloutTrajectory[]> {
      return decodeJsonlGz(await getExpected(store, ref.key, ref.sha256), ref.key) as RolloutTrajectory[]
    },
    async skills(ref: ArtifactRef): Promise<SkillRecord[]> {
      return parseSkillLines((await getExpected(store, ref.key, ref.sha256)).toString('utf8'), ref.key)
    },
    /** The Stage 1 skills (parsed annotations), for rows that read the library. */
    library(run: RunRef, algorithm: string): Promise<{ skills: string[]; sha256: string }> {
      return readSkillLibrary(store, run.runId, algorithm)
    },
    /** The Stage 1 annotations with a parsed skill (prompt → answer), for Stage 2's mixed-in analyzer examples. */
    annotations(run: RunRef): Promise<{ records: SkillRecord[]; sha256: string }> {
      return readAnnotations(store, run.runId, 'stage2.stage1Mix')
    },
    async plan(run: RunRef): Promise<RunPlan> {
      return (await getJson(store, keys.runPlan(run.runId))) as RunPlan
    },
  }
}

export type PhaseReaders = ReturnType<typeof phaseReaders>
