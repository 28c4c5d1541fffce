// The one table of errors that no retry can fix, and the failure type each becomes. The activities classify
// what their bodies throw with it; the workflows' retry policy refuses the same types (workflows/
// activity-proxies.ts), so a failure is final whether an activity or Temporal's retry decides. No imports but
// the Temporal failure class: the workflow bundle reads this module too.
import { ApplicationFailure } from '@temporalio/common'

/**
 * Error class name → failure type. Deterministic by nature: a bad configuration, a corrupt or missing artifact,
 * an impossible input, a diverged loss. SyntaxError is a JSON artifact that does not parse, RangeError an index
 * or size out of bounds (store keys, the rescore format): both are the same on every retry.
 */
export const FATAL_ERRORS: Readonly<Record<string, string>> = {
  IntegrityError: 'IntegrityError',
  CheckpointError: 'CheckpointError',
  LoraError: 'LoraError',
  InvalidKeyError: 'InvalidKeyError',
  InvalidRunIdError: 'InvalidRunIdError',
  RunConfigError: 'RunConfigError',
  CorePhaseError: 'CorePhaseError',
  PromptBudgetError: 'PromptBudgetError',
  SeedInputError: 'SeedInputError',
  LossConfigError: 'LossConfigError',
  OptimizerError: 'OptimizerError',
  ShapeError: 'ShapeError',
  GraphError: 'GraphError',
  RangeError: 'RangeError',
  NotFoundError: 'NotFoundError',
  NonFiniteLossError: 'NonFiniteLossError',
  StoreAccessError: 'StoreAccessError',
  // a full disk or a refused folder of the folder store: no retry frees space or fixes permissions, the operator
  // does, then `seedflow retry` (the run waits for an operator at once, with the message naming key and folder)
  StoreFullError: 'StoreFullError',
  StorePermissionError: 'StorePermissionError',
  StoreIdentityError: 'StoreIdentityError',
  SyntaxError: 'CorruptArtifact',
  RescoreFormatError: 'CorruptArtifact',
  DamagedArtifactsError: 'CorruptArtifact',
  LibraryMissingError: 'LibraryMissing',
  ForkError: 'ForkError',
  StoreMismatchError: 'StoreMismatch',
  AnnotatorConfigError: 'AnnotatorConfigError',
  AnnotatorAuthError: 'AnnotatorAuthError',
  AnnotationShortfallError: 'AnnotationShortfall',
}

/** Failure types the activities raise directly (fatal() below) besides those of the table. */
const RAISED_TYPES = ['InvalidRunConfig', 'CorruptArtifact', 'PhaseContractError', 'ModelImportError'] as const

/** Every failure type that is final: what the workflows' retry policy lists as non-retryable. */
export const NON_RETRYABLE_TYPES: readonly string[] = [...new Set([...Object.values(FATAL_ERRORS), ...RAISED_TYPES])]

/** A failure no retry can fix, named by what it means to an operator. */
export function fatal(message: string, type: (typeof RAISED_TYPES)[number] | string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(message, type)
}

/** An error a phase body threw, as Temporal should see it: fatal ones non-retryable with their type, the rest as is. */
export function classifyFailure(what: string, error: unknown): unknown {
  if (error instanceof ApplicationFailure) return error
  const e = error as Error
  const type = e?.name === undefined ? undefined : FATAL_ERRORS[e.name]
  if (type === undefined) return error
  return ApplicationFailure.create({ message: `${what}: ${e.message}`, type, nonRetryable: true, cause: e })
}

/** A run's configuration could not be forked (a missing source run or fork point). */
export class ForkError extends Error {
  override name = 'ForkError'
}
