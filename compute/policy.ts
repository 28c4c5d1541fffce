// A checkpoint loaded for acting, scoring and training: the model on an engine plus the text ↔ token codec
// every phase shares, so that rollout, rescore, update and SFT tokenize a prompt the same way.
import type { Engine } from '../engine/index.ts'
import { mulberry32 } from '../envs/rng.ts'
import { type ChatTemplate, chatTemplateOf } from '../policy/chat-template.ts'
import type { Checkpoint } from '../policy/checkpoint.ts'
import { initLora, type LoraConfig, mergeLora } from '../policy/lora.ts'
import type { PolicyModel } from '../policy/policy-model.ts'
import { TextTokenizer, TINY_SPECIAL_TOKENS } from '../policy/tokenizer.ts'
import { Trainer, type TrainerOptions } from '../policy/trainer.ts'
import { ENGINE_DEFAULTS, type EngineSettingsConfig } from '../seed/config.ts'

export class CorePhaseError extends Error {
  override name = 'CorePhaseError'
}

/** How a prompt text becomes context tokens and a response's tokens become text. */
export interface PromptCodec {
  /** Context tokens of one user message, ready for the response to follow. */
  promptIds(text: string): number[]
  /** Tokens of a response text as a demonstration (ends with the end-of-sequence token). */
  responseIds(text: string): number[]
  /** Response text of sampled tokens (special tokens dropped). */
  decode(ids: readonly number[]): string
  /** Token count of `promptIds(text)`, for prompt budgets. */
  countPromptTokens(text: string): number
  eosIds: readonly number[]
}

export interface Policy {
  /** The owner of the policy's trained tensors and optimizer state (policy/trainer.ts). */
  trainer: Trainer
  /** `trainer.model`: its graphs. */
  model: PolicyModel
  codec: PromptCodec
  checkpoint: Checkpoint
}

/**
 * The codec of a tokenizer: the built-in model's prompts are `<|im_start|>` text `<|im_end|>` (it has no chat
 * template); an imported model with ChatML tokens gets a ChatML user turn and the assistant header.
 */
export function promptCodec(tokenizer: TextTokenizer, kind: 'builtin' | 'chatml'): PromptCodec {
  const start = tokenizer.tokenId(TINY_SPECIAL_TOKENS[1])
  const end = tokenizer.tokenId(TINY_SPECIAL_TOKENS[2])
  if (start === undefined || end === undefined) {
    throw new CorePhaseError(`the tokenizer has no ${TINY_SPECIAL_TOKENS[1]} / ${TINY_SPECIAL_TOKENS[2]} tokens`)
  }
  const eos = tokenizer.eosIds[0] as number
  const promptIds =
    kind === 'builtin'
      ? (text: string) => [start, ...tokenizer.encode(text), end]
      : (text: string) => [
          start,
          ...tokenizer.encode(`user\n${text}`),
          end,
          ...tokenizer.encode('\n'),
          start,
          ...tokenizer.encode('assistant\n'),
        ]
  const overhead = promptIds('').length
  return {
    promptIds,
    responseIds: (text) => [...tokenizer.encode(text), kind === 'builtin' ? eos : end],
    decode: (ids) => tokenizer.decode(ids, { skipSpecial: true }),
    countPromptTokens: (text) => overhead + tokenizer.encode(text).length,
    eosIds: kind === 'builtin' ? tokenizer.eosIds : [...tokenizer.eosIds, end],
  }
}

/**
 * The codec of a model with a chat template (an imported instruct model): a prompt is the template's rendering
 * of one user turn plus the generation prompt, tokenized as a whole (counted exactly, since tokens may merge
 * across the template's text); a demonstration response ends with the template's end-of-turn token.
 */
export function chatTemplateCodec(tokenizer: TextTokenizer, template: ChatTemplate): PromptCodec {
  const promptIds = (text: string) =>
    tokenizer.encode(template.render([{ role: 'user', content: text }], { addGenerationPrompt: true }))
  const endOfTurn = endOfTurnId(tokenizer, template)
  const eos = tokenizer.eosIds[0] as number
  return {
    promptIds,
    responseIds: (text) => [...tokenizer.encode(text), endOfTurn ?? eos],
    decode: (ids) => tokenizer.decode(ids, { skipSpecial: true }),
    countPromptTokens: (text) => promptIds(text).length,
    eosIds:
      endOfTurn === undefined || tokenizer.eosIds.includes(endOfTurn)
        ? tokenizer.eosIds
        : [...tokenizer.eosIds, endOfTurn],
  }
}

/**
 * The special token a template writes right after an assistant message (`<|im_end|>`, `<|eot_id|>`), found by
 * rendering a marked assistant turn; undefined when what follows is not a special token.
 */
function endOfTurnId(tokenizer: TextTokenizer, template: ChatTemplate): number | undefined {
  const marker = '\u0001seedflow-response\u0001'
  const rendered = template.render(
    [
      { role: 'user', content: 'x' },
      { role: 'assistant', content: marker },
    ],
    { addGenerationPrompt: false },
  )
  const at = rendered.lastIndexOf(marker)
  if (at < 0) return undefined
  const first = tokenizer.encode(rendered.slice(at + marker.length).trimStart())[0]
  return first !== undefined && tokenizer.decode([first], { skipSpecial: true }) === '' ? first : undefined
}

/**
 * Loads a checkpoint into a trainer on `engine` (its arrays are not changed: steps replace the tensors where
 * the engine keeps them). A checkpoint with a chat template (tokenizer_config.json of an imported model) gets
 * the template's codec; otherwise `kind` decides (the built-in model's plain `<|im_start|>` text `<|im_end|>`
 * by default). `settings` (the run config's `engine`) lay out its graphs.
 */
export function loadPolicy(
  engine: Engine,
  checkpoint: Checkpoint,
  options: { kind?: 'builtin' | 'chatml'; settings?: EngineSettingsConfig } = {},
): Policy {
  const codec = checkpointCodec(checkpoint, options.kind)
  const layout = modelOptions(options.settings ?? ENGINE_DEFAULTS)
  const lora = checkpoint.lora
  // with adapters: the adapter graphs over the frozen base, so rollout, rescore and update compute one function
  const trainer = lora
    ? new Trainer(engine, checkpoint.config, lora.base, {
        ...layout,
        lora: { config: lora.config, adapters: lora.adapters },
      })
    : new Trainer(engine, checkpoint.config, checkpoint.weights, layout)
  // the trainer holds the weights and adapters now (a LoRA base stays referenced by it): the policy keeps the rest
  const { lora: _held, ...rest } = checkpoint
  return { trainer, model: trainer.model, codec, checkpoint: { ...rest, weights: new Map() } }
}

/** The trainer and model options of a run config's engine settings. */
export function modelOptions(settings: EngineSettingsConfig): TrainerOptions {
  return {
    ...(settings.recomputeLayers ? { graph: { recomputeLayers: true } } : {}),
    decodeWeights: settings.decodeWeights,
    ...(settings.microBatchSize !== undefined ? { microBatchRows: settings.microBatchSize } : {}),
  }
}

/** The seed stream of fresh LoRA adapters (mixed with the run seed). */
export const LORA_SEED = 0x10ba

/**
 * Puts fresh LoRA adapters (PEFT init, seeded) on a policy without adapters, over its weights as they are now,
 * so that training moves the adapters only; a policy that has adapters keeps them, and must have this config.
 * Returns whether adapters were added (a fresh adapter's optimizer state is fresh too).
 */
export async function withLora(policy: Policy, lora: LoraConfig, seed: number): Promise<boolean> {
  const have = policy.trainer.lora
  if (have) {
    const same =
      have.rank === lora.rank &&
      have.alpha === lora.alpha &&
      have.targets.length === lora.targets.length &&
      have.targets.every((t) => lora.targets.includes(t))
    if (!same)
      throw new CorePhaseError(
        `the checkpoint's LoRA adapter (rank ${have.rank}, alpha ${have.alpha}, targets ` +
          `${have.targets.join(', ')}) is not model.lora (rank ${lora.rank}, alpha ${lora.alpha}, targets ` +
          `${lora.targets.join(', ')}): an adapter's shape cannot change within a run`,
      )
    return false
  }
  const { trainer } = policy
  const base = await trainer.trained()
  await trainer.release()
  const c = trainer.config
  policy.trainer = new Trainer(trainer.engine, c, base, {
    ...trainer.model.options(),
    ...(trainer.microBatchRows !== undefined ? { microBatchRows: trainer.microBatchRows } : {}),
    lora: { config: lora, adapters: initLora(c, lora, mulberry32(seed)) },
  })
  policy.model = policy.trainer.model
  return true
}

/** The codec `loadPolicy` gives a checkpoint (its chat template's, else `kind`'s); throws when it has none. */
export function checkpointCodec(checkpoint: Checkpoint, kind: 'builtin' | 'chatml' = 'builtin'): PromptCodec {
  if (!checkpoint.tokenizerJson) throw new CorePhaseError('the checkpoint has no tokenizer.json')
  const tokenizer = new TextTokenizer(checkpoint.tokenizerJson, checkpoint.tokenizerConfig ?? {}, checkpoint.eosIds)
  const template = chatTemplateOf(checkpoint.tokenizerConfig)
  return template ? chatTemplateCodec(tokenizer, template) : promptCodec(tokenizer, kind)
}

/** The policy's current weights as a checkpoint: the trained tensors read back from the engine. */
export async function toCheckpoint(policy: Policy): Promise<Checkpoint> {
  const { trainer } = policy
  const { lora: _previous, ...rest } = policy.checkpoint
  const trained = await trainer.trained()
  if (!trainer.lora) return { ...rest, weights: trained }
  const base = trainer.base as Map<string, Float32Array>
  return {
    ...rest,
    weights: mergeLora(base, trained, trainer.config, trainer.lora),
    lora: { config: trainer.lora, adapters: trained, base },
  }
}
