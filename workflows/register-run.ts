// Deterministic: runs in the workflow sandbox.
import { ApplicationFailure, proxyActivities, workflowInfo } from '@temporalio/workflow'
import type { Activities, ArtifactRef, RecordRunInput } from '../activities/index.ts'
import { boundProblems, runIdProblems, unknownKeyProblems } from '../seed/config-problems.ts'
import { assertValidRunId } from '../store/keys.ts'

const INPUT_FIELDS = ['runId', 'config']

const { recordRun } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: {
    maximumAttempts: 5,
    initialInterval: '1 second',
    nonRetryableErrorTypes: ['RunConfigConflict', 'InvalidKeyError'],
  },
})

/**
 * Records a run's configuration under its run id (= this workflow's id). The first step of every run, and
 * for now the thin slice that proves worker, activity and store end to end.
 */
export async function registerRun(input: RecordRunInput): Promise<ArtifactRef> {
  const problems = unknownKeyProblems(input, INPUT_FIELDS)
  try {
    assertValidRunId(input?.runId)
  } catch (error) {
    problems.push(`runId: ${(error as Error).message}`)
  }
  problems.push(...runIdProblems(input?.runId, workflowInfo().workflowId))
  if (typeof input?.config !== 'object' || input.config === null || Array.isArray(input.config)) {
    problems.push('config: must be a JSON object')
  }
  if (problems.length > 0)
    throw ApplicationFailure.nonRetryable(`invalid run input: ${boundProblems(problems).join('; ')}`, 'InvalidRunInput')
  return recordRun(input)
}
