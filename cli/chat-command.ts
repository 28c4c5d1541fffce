// `seedflow chat <checkpoint>`: a terminal conversation with the plain policy through its chat template. Each
// line read is a user turn; the reply is written to stdout as it is sampled and kept in the conversation (the
// oldest turns are dropped when it no longer fits the context). Works with stdin a pipe; Ctrl-C, end of input
// or /exit ends it, /reset starts over.
import { createInterface, type ReadLineOptions } from 'node:readline'
import { createLocalEngine } from '../engine/index.ts'
import { mixSeed } from '../envs/rng.ts'
import type { ChatMessage } from '../policy/chat-template.ts'
import { describeSource, resolveCheckpoint } from './checkpoint-source.ts'
import { type CommandIo, lazyStore, STDIO } from './generate-command.ts'
import { localDecoder } from './local-decoder.ts'
import { RunInputError } from './run-checkpoint.ts'

export interface ChatCommandOptions {
  run?: string
  iteration?: string
  system?: string
  maxTokens: number
  temperature: number
  topP?: number
  seed?: number
  context?: number
  threads?: number
}

/**
 * In a terminal, readline puts stdin in raw mode, so the typed text shows only if readline echoes it: it gets a
 * terminal to echo to (stderr, keeping stdout for replies) and the `> ` prompt. With no terminal to echo to,
 * stdin stays in the terminal's own line mode, which echoes; from a pipe, lines are read as they come.
 */
export function chatReadlineOptions(input: NodeJS.ReadableStream, echo: NodeJS.WritableStream): ReadLineOptions {
  const tty = (input as { isTTY?: boolean }).isTTY === true && (echo as { isTTY?: boolean }).isTTY === true
  return tty ? { input, output: echo, terminal: true, prompt: '> ' } : { input, terminal: false }
}

export async function chatCommand(
  checkpoint: string | undefined,
  options: ChatCommandOptions,
  io: CommandIo = STDIO,
  input: NodeJS.ReadableStream = process.stdin,
  echo: NodeJS.WritableStream = process.stderr,
): Promise<void> {
  if (!(options.temperature >= 0))
    throw new RunInputError(`--temperature must be 0 (greedy) or more, got ${options.temperature}`)
  const resolved = await resolveCheckpoint(checkpoint, options, lazyStore())
  const where = describeSource(resolved.source)
  const ckpt = await resolved.load()
  const engine = createLocalEngine(options.threads ? { threads: options.threads } : {})
  const decoder = localDecoder(engine, ckpt, where, options.context)
  const render = decoder.model.chatPrompt
  const rl = createInterface(chatReadlineOptions(input, echo))
  const tty = rl.terminal
  let current: { interrupt(): void } | undefined
  let ended = false
  const stop = () => {
    ended = true
    current?.interrupt()
    rl.close()
  }
  process.once('SIGINT', stop)
  rl.once('SIGINT', stop)
  try {
    if (!render)
      throw new RunInputError(
        `${where} has no chat template (tokenizer_config.json chat_template), which \`seedflow chat\` needs; ` +
          'use `seedflow generate <checkpoint> --prompt …` to complete plain text',
      )
    io.err(
      `seedflow: chatting with ${where} (context ${decoder.context} tokens); /reset starts over, /exit or Ctrl-C ends\n`,
    )
    const system: ChatMessage[] = options.system ? [{ role: 'system', content: options.system }] : []
    let turns: ChatMessage[] = []
    let turn = 0
    const ask = () => {
      if (tty) rl.prompt()
    }
    ask()
    for await (const line of rl) {
      const content = line.trim()
      if (content === '/exit') break
      if (content === '/reset') {
        turns = []
        io.err('seedflow: conversation cleared\n')
        ask()
        continue
      }
      if (content === '') {
        ask()
        continue
      }
      turns.push({ role: 'user', content })
      // drop the oldest exchanges until the prompt leaves room for a reply
      let prompt = decoder.model.encode(render([...system, ...turns]))
      while (prompt.length + options.maxTokens > decoder.context && turns.length > 1) {
        turns = turns.slice(2)
        prompt = decoder.model.encode(render([...system, ...turns]))
      }
      if (prompt.length + options.maxTokens > decoder.context) {
        io.err(
          `seedflow: this message takes ${prompt.length} tokens; with --max-tokens ${options.maxTokens} it exceeds the context of ${decoder.context}\n`,
        )
        turns.pop()
        ask()
        continue
      }
      const run = decoder.complete(
        prompt,
        {
          max_tokens: options.maxTokens,
          temperature: options.temperature,
          top_p: options.topP ?? null,
          seed: mixSeed(options.seed ?? 0, turn++),
        },
        (text) => io.out(text),
      )
      current = run
      const reply = await run.done
      current = undefined
      io.out('\n')
      turns.push({ role: 'assistant', content: reply.text })
      io.err(
        `seedflow: ${reply.tokens.length} tokens (prompt ${prompt.length}), ${(reply.tokens.length / Math.max(reply.seconds, 1e-9)).toFixed(1)} tokens/s, finish: ${reply.finish}\n`,
      )
      if (ended) break
      ask()
    }
  } finally {
    process.off('SIGINT', stop)
    rl.close()
    await decoder.close()
    await engine.close()
  }
}
