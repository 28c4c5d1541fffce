// SmolLM2-135M-Instruct (`seedflow import` of the Q4_1 GGUF, README "A real model") on household, sized for 2
// CPU cores (docs/benchmarks.md §6.7): LoRA adapters, a warm-start on the expert's demonstrations (the base
// model writes no well-formed response), Stage 1 from the oracle annotator, then SEED with the policy writing
// its own hindsight skills in natural language.
import { LORA_TARGETS } from '../../policy/lora-targets.ts'
import type { AlgorithmName } from '../algorithms.ts'
import { type RunConfig, type RunConfigInput, runConfig } from '../config.ts'

/**
 * SmolLM2-135M-Instruct on household, sized so that a whole run takes about 2¾ hours on a 2-core machine
 * (docs/benchmarks.md §6.8):
 * - the base model writes no well-formed household response, so it warm-starts by behaviour cloning on the expert's
 *   demonstrations (the sub-goal as the thought), checked on 16 validation tasks, stopped at 30%, keeping the best;
 * - LoRA rank 16 (alpha 32) on all seven projections: the warm-start teaches a new output format and command
 *   grammar, and a step costs about what q/v costs (bench/results/lora.json); Stage 1 and Stage 2 go on training them;
 * - the compact prompt and 15 steps (the expert finishes 70% of validation tasks within 15, docs/benchmarks.md §6.7);
 * - Stage 1 on the oracle's annotations of 32 rollouts, replaying the warm-start's demonstrations as acting data;
 * - Stage 2: 8 iterations of one task × 4 samples, the analyzer prompt and its JSON answer inside 2,048 positions;
 *   lr 2e-5, 20× the paper's full fine-tuning rate, for adapters;
 * - evaluation on 16 validation tasks at T = 0.4: base, Stage 1 and at the end.
 * A GPU would take the paper's sizes instead (docs/benchmarks.md §6.7).
 */
function preset(folder: string): Omit<RunConfigInput, 'algorithm'> {
  return {
    env: 'household',
    model: {
      kind: 'imported',
      folder,
      maxPositions: 2048,
      lora: { rank: 16, alpha: 32, dropout: 0, targets: [...LORA_TARGETS] },
    },
    prompt: { compact: true, compactGrids: false, historyWindow: 1, maxPromptTokens: 480, maxResponseTokens: 40 },
    warmstart: {
      demoTasks: 400,
      mistakeRate: 0.25,
      labelNoise: 0.05,
      skillDemoShare: 0.3,
      expertThoughts: true,
      keepBest: true,
      steps: 120,
      batchSize: 8,
      lr: 1e-3,
      warmupSteps: 10,
      formatTokenWeight: 0.3,
      framePolishSteps: 0,
      evalEvery: 60,
      evalTasks: 16,
      targetSuccess: 0.3,
    },
    stage1: {
      tasks: 8,
      samplesPerTask: 4,
      temperature: 1,
      maxEnvSteps: 15,
      annotator: { kind: 'oracle' },
      steps: 30,
      batchSize: 4,
      lr: 2e-4,
      warmupSteps: 4,
      actingMix: 0.5,
      actingData: 'demonstrations',
    },
    stage2: {
      iterations: 8,
      tasksPerStep: 1,
      groupSize: 4,
      maxEnvSteps: 15,
      temperature: 1,
      lr: 2e-5,
      weightDecay: 0.01,
      maxGradNorm: 1,
      miniBatchSize: 16,
      clipLow: 0.2,
      clipHigh: 0.2,
      clipRatioC: 3,
      klCoef: 0.01,
      entropyCoef: 0.001,
      opdCoef: 0.01,
      opdBeta: 5,
      advantageMode: 'meanStd',
      advantageStatistics: 'steps',
      perEpisodeWeight: true,
      aggregation: 'token-mean',
      invalidPenalty: 0.1,
      analyzer: { maxPromptTokens: 1600, maxAnswerTokens: 160 },
    },
    evaluation: { split: 'validation', seedStart: 0, tasks: 16, temperature: 0.4, maxEnvSteps: 15, every: 8 },
    seed: 1,
    threads: 2,
    // a mini-batch of 16 step samples (~300 tokens each) keeps its activations for 30 layers otherwise
    engine: { recomputeLayers: true },
  }
}

/** SmolLM2-135M-Instruct (an imported folder) on household, sized for 2 CPU cores. */
export function cpuHouseholdSmollm2Preset(folder: string, algorithm: AlgorithmName = 'seed'): RunConfig {
  return runConfig({ ...preset(folder), algorithm })
}
