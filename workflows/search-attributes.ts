// Deterministic: runs in the workflow sandbox. The custom search attributes of docs/design.md §10.4.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common'

export const SEED_ITERATION = defineSearchAttributeKey('SeedIteration', SearchAttributeType.INT)
export const SEED_PHASE = defineSearchAttributeKey('SeedPhase', SearchAttributeType.KEYWORD)
export const SEED_ENV = defineSearchAttributeKey('SeedEnv', SearchAttributeType.KEYWORD)
export const SEED_ALGORITHM = defineSearchAttributeKey('SeedAlgorithm', SearchAttributeType.KEYWORD)
export const SEED_SUCCESS_RATE = defineSearchAttributeKey('SeedSuccessRate', SearchAttributeType.DOUBLE)
