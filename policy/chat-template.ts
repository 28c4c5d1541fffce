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

/**
 * The chat template of a tokenizer_config.json (`chat_template` as a string, or the `default` entry of a list of
 * named templates) with its bos / eos token contents; undefined when it has none.
 */
export function chatTemplateOf(tokenizerConfig: Record<string, unknown> | undefined): ChatTemplate | undefined {
  const source = tokenizerConfig?.chat_template
  const text =
    typeof source === 'string'
      ? source
      : Array.isArray(source)
        ? (source as { name?: unknown; template?: unknown }[]).find((t) => t?.name === 'default')?.template
        : undefined
  if (typeof text !== 'string') return undefined
  return new ChatTemplate(text, {
    ...specialContent('bosToken', tokenizerConfig?.bos_token),
    ...specialContent('eosToken', tokenizerConfig?.eos_token),
  })
}

function specialContent<K extends string>(key: K, token: unknown): Partial<Record<K, string>> {
  const content = typeof token === 'string' ? token : (token as { content?: unknown } | null)?.content
  return typeof content === 'string' ? ({ [key]: content } as Record<K, string>) : {}
}
