// A leaf (no imports): the run config's schema reads it in the workflow sandbox.

/** The projections a LoRA adapter may target, by their Hugging Face module names. */
export const LORA_TARGETS = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const
export type LoraTarget = (typeof LORA_TARGETS)[number]
