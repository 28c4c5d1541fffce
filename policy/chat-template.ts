import { Template } from '@huggingface/jinja'

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant'
  content: string
}

/**
 * An imported model's chat template (tokenizer_config.json `chat_template`, Jinja), rendered with a
 * maintained Jinja implementation. The built-in tiny model has no template: its prompts are plain text.
 */
export class ChatTemplate {
  readonly #template: Template
  readonly #specials: Record<string, string>

  constructor(source: string, specials: { bosToken?: string; eosToken?: string } = {}) {
    this.#template = new Template(source)
    this.#specials = { bos_token: specials.bosToken ?? '', eos_token: specials.eosToken ?? '' }
  }

  render(messages: readonly ChatMessage[], options: { addGenerationPrompt?: boolean } = {}): string {
    return this.#template.render({
      messages,
      add_generation_prompt: options.addGenerationPrompt ?? true,
      ...this.#specials,
    })
  }
}
