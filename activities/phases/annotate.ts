// Annotate: the base policy rolls out Stage 1's train tasks and the run's annotator (the environment's oracle, or
// an external OpenAI-compatible endpoint) annotates every trajectory, writing the Stage 1 trajectories and the
// annotations (the skill library). Stage 1 does this before its SFT (annotation below); rows that read the
// library but start from the base run it alone. The external annotator's replies are stored one per prompt hash
// as they arrive (keys.sftReply), outside any attempt, so a retried attempt reuses them.

import { annotateStage1, type Policy } from '../../compute/index.ts'
import { type ReplyStore, StoredReplySchema } from '../../compute/openai-annotator.ts'
import type { AnnotationCounts, CheckpointRef, RunRef } from '../../records/contracts.ts'
import { encodeJsonlGz } from '../../records/jsonl.ts'
import type { RunConfig } from '../../seed/config.ts'
import type { ArtifactStore } from '../../store/artifact-store.ts'
import { getJson, putJson } from '../../store/json.ts'
import { keys } from '../../store/keys.ts'
import { heartbeat, type PhaseDef, scopeOf } from '../phase-activity.ts'

/** Stage 1's annotation of the base policy's rollouts, written to the store. */
export async function annotation(
  store: ArtifactStore,
  run: RunRef,
  config: RunConfig,
  policy: Policy,
  attempt: number,
) {
  const annotated = await annotateStage1(policy, config, {
    replies: storedReplies(store, run.runId),
    onProgress: (step, steps) => heartbeat({ phase: 'annotate', step, steps }),
  })
  heartbeat()
  const counts: AnnotationCounts = {
    trajectories: annotated.skills.length,
    annotated: annotated.skills.filter((s) => s.ok).length,
    requestFailures: annotated.annotator.requestFailures,
    unparsed: annotated.annotation.parse.failed,
  }
  const floor = config.stage1.minAnnotatedShare
  if (counts.trajectories > 0 && counts.annotated < floor * counts.trajectories)
    throw new AnnotationShortfallError(run.runId, counts, floor, config.stage1.annotator)
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
    stats: {
      rolloutSuccess: annotated.rollout.successRate,
      ...counts,
      requests: annotated.annotator.requests,
      retries: annotated.annotator.retries,
      repliesReused: annotated.annotator.reused,
    },
  }
}

/** Too few trajectories were annotated (below `stage1.minAnnotatedShare`): the run waits for an operator. */
export class AnnotationShortfallError extends Error {
  override name = 'AnnotationShortfallError'
  constructor(runId: string, counts: AnnotationCounts, floor: number, annotator: RunConfig['stage1']['annotator']) {
    const who =
      annotator.kind === 'openai'
        ? `the annotator at ${annotator.baseUrl} (model ${annotator.model}, key from ${annotator.apiKeyEnv} on the worker)`
        : `the ${annotator.kind} annotator`
    super(
      `run ${runId}: ${who} annotated ${counts.annotated} of ${counts.trajectories} Stage 1 trajectories, fewer ` +
        `than stage1.minAnnotatedShare ${floor} of them (${counts.requestFailures} requests failed after their ` +
        `retries, ${counts.unparsed} answers did not parse); replies already received are kept and reused by a retry`,
    )
  }
}

/** The run's stored replies of the external annotator; an unreadable one is asked for again. */
export function storedReplies(store: ArtifactStore, runId: string): ReplyStore {
  return {
    async load(promptHash) {
      const key = keys.sftReply(runId, promptHash)
      if (!(await store.head(key))) return undefined
      const parsed = StoredReplySchema.safeParse(await getJson(store, key).catch(() => undefined))
      return parsed.success ? parsed.data : undefined
    },
    async save(reply) {
      await putJson(store, keys.sftReply(runId, reply.promptHash), reply)
    },
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
