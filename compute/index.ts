// The training core of a SEED run as plain functions over an engine and in-memory values (no store, no
// Temporal): the activities wrap these with artifact I/O and idempotency.
export {
  type AnalyzeInput,
  type AnalyzeResult,
  type AnalyzeStats,
  analyze,
  analyzerEpisode,
  annotateWithOracle,
  oracleAnswer,
  type SkillRecord,
} from './analyze.ts'
export { type EvaluateInput, type EvaluationResult, evaluate } from './evaluate.ts'
export {
  aggregateEvaluation,
  type Estimate,
  type EvaluationAggregates,
  type EvaluationTaskRecord,
  type FamilyAggregate,
} from './evaluation-stats.ts'
export {
  actingSkills,
  episodeIndex,
  evaluationSeed,
  evaluationSkills,
  type IterationPlan,
  iterationPlan,
  iterationSeed,
  libraryUse,
  lossTerms,
  type PlanConfig,
  shardTasks,
  type TeacherSource,
  teacherBlocks,
  teacherSource,
} from './plan.ts'
export {
  CorePhaseError,
  chatTemplateCodec,
  checkpointCodec,
  LORA_SEED,
  loadPolicy,
  type Policy,
  type PromptCodec,
  promptCodec,
  toCheckpoint,
  withLora,
} from './policy.ts'
export {
  compactGrid,
  type FittedPrompt,
  fitPrompt,
  keepHistory,
  PromptBudgetError,
  promptContext,
  stepPrompt,
} from './prompts.ts'
export {
  type RescoreInput,
  type RescoreResult,
  type RescoreStats,
  rescore,
  type ScoredSample,
  type SideMeans,
} from './rescore.ts'
export {
  type RolloutInput,
  type RolloutResult,
  type RolloutStats,
  type RolloutStep,
  type RolloutTrajectory,
  rollout,
  sampleTasks,
} from './rollout.ts'
export { type SftInput, type SftStats, sft, skillPairs } from './sft.ts'
export { annotateStage1, type Stage1Annotation, stage1Seed, trainStage1 } from './stage1.ts'
export {
  type ExamplePool,
  type PoolLoss,
  poolLossStats,
  type SupervisedExample,
  type SupervisedResult,
  type SupervisedSettings,
  supervisedTrain,
} from './supervised.ts'
export {
  actorFeeds,
  actorLossBuilder,
  loadActorTrainModel,
  type MiniBatchMetrics,
  padToMiniBatch,
  sampleAdvantages,
  type UpdateInput,
  type UpdateMetrics,
  type UpdateResult,
  type UpdateSettings,
  update,
} from './update.ts'
export {
  type ImportedWarmstartModel,
  type PolishCheck,
  polishCheck,
  startingPolicy,
  type WarmstartInput,
  type WarmstartModel,
  type WarmstartResult,
  type WarmstartStats,
  warmstart,
} from './warmstart.ts'
