import { type ModelConfig, PRESETS } from '../../policy/config.ts'

/** A model small enough for float64 finite differences: 2 layers, 4 query heads sharing 2 KV heads. */
export const SMALL: ModelConfig = {
  ...PRESETS.tiny,
  vocabSize: 61,
  hiddenSize: 32,
  intermediateSize: 48,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 8,
  maxPositions: 64,
}
