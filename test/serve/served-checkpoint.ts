// A small random-weight checkpoint with a byte-level BPE tokenizer for the serving tests; with `chat`, its
// tokenizer_config.json carries a ChatML chat template (as an instruct model's does).
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { mulberry32 } from '../../envs/rng.ts'
import { trainByteLevelBpe } from '../../policy/bpe-trainer.ts'
import { type Checkpoint, encodeCheckpoint } from '../../policy/checkpoint.ts'
import { type ModelConfig, PRESETS } from '../../policy/config.ts'
import { initWeights } from '../../policy/init.ts'
import { TINY_SPECIAL_TOKENS } from '../../policy/tokenizer.ts'

export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

const CORPUS = [
  'the quick brown fox jumps over the lazy dog',
  'hello world, how are you today? I am fine, thank you.',
  'push the box onto the goal: up, down, left, right',
  'café naïve résumé — ünïcödé ✓ 日本語',
]

export const SERVED_CONFIG: ModelConfig = {
  ...PRESETS.tiny,
  vocabSize: 320,
  hiddenSize: 64,
  intermediateSize: 128,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  maxPositions: 512,
}

export function servedCheckpoint(options: { chat: boolean; config?: ModelConfig }): Checkpoint {
  const config = options.config ?? SERVED_CONFIG
  const tokenizerJson = trainByteLevelBpe(CORPUS, {
    vocabSize: config.vocabSize,
    specialTokens: [...TINY_SPECIAL_TOKENS],
  })
  return {
    config,
    weights: initWeights(config, mulberry32(11), 0.3),
    tokenizerJson,
    ...(options.chat
      ? { tokenizerConfig: { chat_template: CHATML_TEMPLATE, eos_token: '<|im_end|>', bos_token: null } }
      : {}),
    eosIds: [0],
  }
}

/** Writes the checkpoint as a folder (what `seedflow serve <folder>` reads). */
export function writeCheckpointFolder(dir: string, checkpoint: Checkpoint): string {
  mkdirSync(dir, { recursive: true })
  for (const [file, bytes] of Object.entries(encodeCheckpoint(checkpoint))) writeFileSync(join(dir, file), bytes)
  return dir
}
