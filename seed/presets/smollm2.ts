// SmolLM2-135M-Instruct (`seedflow import` of the Q4_1 GGUF, README "A real model") on household, sized for 2
// CPU cores (docs/benchmarks.md §6.7): LoRA adapters, a warm-start on the expert's demonstrations (the base
// model writes no well-formed response), Stage 1 from the oracle annotator, then SEED with the policy writing
// its own hindsight skills in natural language.
import { LORA_TARGETS } from '../../policy/lora-targets.ts'
import type { AlgorithmName } from '../algorithms.ts'
import { type RunConfig, type RunConfigInput, runConfig } from '../config.ts'

/**
 * SmolLM2-135M-Instruct on household, sized so that a whole run takes about 2¾ hours on a 2-core machine
 * (the pieces: docs/benchmarks.md §6.7; the run: docs/benchmarks.md §6.8):
 * - the base model wrote no well-formed response on 24 validation tasks (720 of 720 steps invalid, 0 successes,
 *   with the compact prompt; the full prompt's first two steps were no better), so GRPO would get only zero
 *   advantages: it warm-starts by behaviour cloning on the expert's demonstrations (with its sub-goal as the
 *   thought, as the built-in household preset), 120 steps checked every 60 on 16 validation tasks, stopped at
 *   30%, keeping the best check (54 minutes; loss 1.01 → 0.12, every response well-formed);
 * - LoRA rank 16 (alpha 32) on all seven projections: the warm-start teaches a new output format and command
 *   grammar, for which adapters on the MLPs as well as attention are the usual choice, and a step costs about
 *   what q/v costs (docs/benchmarks.md §6.3: the frozen layers' activation gradients dominate either way);
 *   4.9M trained parameters, AdamW state of 37 MiB instead of 1 GiB. Stage 1 and Stage 2 go on training them;
 * - the compact prompt (~230 tokens with the chat template's system turn, at most ~400 with a skill; responses
 *   ≤ 30 tokens) and 15 steps: the expert needs 13 on average and finishes 70% of validation tasks within 15;
 * - Stage 1 on the oracle's annotations of 32 rollouts, 30 steps replaying the warm-start's demonstrations as
 *   acting data (25 minutes);
 * - Stage 2: 8 iterations of one task × 4 samples (at most 60 step samples, mini-batches of 16 with the layers
 *   recomputed), the analyzer prompt (1,100–1,200 tokens for a 15-step episode) and its JSON answer (the
 *   oracle's: ~100 tokens) inside 2,048 positions; lr 2e-5, 20× the paper's full fine-tuning rate, for adapters;
 * - evaluation on 16 validation tasks at T = 0.4 (6.5 minutes each): base, Stage 1 and at the end.
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
