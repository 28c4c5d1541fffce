// `seedflow generate <checkpoint> --prompt …`: one completion of a prompt by the plain policy, its text written
// to stdout as it is sampled (greedy unless --temperature says otherwise).
import { createLocalEngine } from '../engine/index.ts'
import { localPaths } from '../infra/local-stack.ts'
import type { ArtifactStore } from '../store/artifact-store.ts'
import { storeFromEnv } from '../store/from-env.ts'
import { describeSource, resolveCheckpoint } from './checkpoint-source.ts'
import { localDecoder } from './local-decoder.ts'
import { RunInputError } from './run-checkpoint.ts'

export interface GenerateCommandOptions {
  run?: string
  iteration?: string
  prompt: string
  chat?: boolean
  maxTokens?: number
  temperature: number
  topP?: number
  seed?: number
  stop?: string[]
  context?: number
  threads?: number
  json?: boolean
}

export interface CommandIo {
  out(text: string): void
  err(text: string): void
}

export const STDIO: CommandIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
}

/** The store of `--run` and key checkpoints, opened on first use. */
export function lazyStore(): () => ArtifactStore {
  let store: ArtifactStore | undefined
  return () => {
    store ??= storeFromEnv(localPaths().artifacts)
    return store
  }
}

export async function generateCommand(
  checkpoint: string | undefined,
  options: GenerateCommandOptions,
  io: CommandIo = STDIO,
): Promise<void> {
  if (!(options.temperature >= 0))
    throw new RunInputError(`--temperature must be 0 (greedy) or more, got ${options.temperature}`)
  const resolved = await resolveCheckpoint(checkpoint, options, lazyStore())
  const ckpt = await resolved.load()
  const engine = createLocalEngine(options.threads ? { threads: options.threads } : {})
  const decoder = localDecoder(engine, ckpt, describeSource(resolved.source), options.context)
  try {
    let text = options.prompt
    if (options.chat) {
      if (!decoder.model.chatPrompt)
        throw new RunInputError(
          `${describeSource(resolved.source)} has no chat template: drop --chat to complete the text as it is`,
        )
      text = decoder.model.chatPrompt([{ role: 'user', content: options.prompt }])
    }
    const prompt = decoder.model.encode(text)
    if (prompt.length === 0) throw new RunInputError('--prompt is empty')
    const run = decoder.complete(
      prompt,
      {
        max_tokens: options.maxTokens ?? null,
        temperature: options.temperature,
        top_p: options.topP ?? null,
        seed: options.seed ?? 0,
        stop: options.stop ?? null,
      },
      (delta) => {
        if (!options.json) io.out(delta)
      },
    )
    const onSignal = () => run.interrupt()
    process.once('SIGINT', onSignal)
    const done = await run.done.finally(() => process.off('SIGINT', onSignal))
    if (options.json)
      io.out(
        `${JSON.stringify({ text: done.text, prompt_token_ids: prompt, token_ids: done.tokens, finish_reason: done.finish })}\n`,
      )
    else io.out('\n')
    io.err(
      `seedflow: ${done.tokens.length} tokens in ${done.seconds.toFixed(2)} s ` +
        `(${(done.tokens.length / Math.max(done.seconds, 1e-9)).toFixed(1)} tokens/s), prompt ${prompt.length} tokens, ` +
        `finish: ${done.finish}\n`,
    )
  } finally {
    await decoder.close()
    await engine.close()
  }
}
